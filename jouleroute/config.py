"""``params.yaml`` loaded into typed models: one model per section, unknown keys rejected."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

from jouleroute.backends.config import BackendConfig
from jouleroute.benchmarks.config import PrepareConfig
from jouleroute.energy.config import EnergyConfig, EnergyPolicy
from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.gateway.config import GatewayConfig
from jouleroute.labels.config import LabelsConfig
from jouleroute.paths import PathsConfig
from jouleroute.pool import CandidateSpec, ModelSpec
from jouleroute.replay.config import ImportConfig, PublicPoolConfig, ReplayConfig
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.strict import STRICT_CONTEXT, StrictModel, UniqueKeyLoader, yaml_only_value
from jouleroute.tournament.config import TournamentConfig
from jouleroute.policy.router_section import RouterSection
from jouleroute.training.config import BudgetConfig, GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.validation.config import ValidateConfig


class TrackingConfig(StrictModel):
    enabled: bool = True
    experiment: str = "jouleroute"


class Params(StrictModel):
    """The whole of ``params.yaml``. Section names match stage names."""

    paths: PathsConfig = Field(default_factory=PathsConfig)
    profile_source: str = Field(default="tournament", pattern="^(tournament|replay|import_outcomes|public_pool)$")
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    pool: list[CandidateSpec] = Field(default_factory=list)
    backend: BackendConfig = Field(default_factory=BackendConfig)
    energy: EnergyConfig = Field(default_factory=EnergyConfig)  # the meter
    energy_policy: EnergyPolicy = Field(default_factory=EnergyPolicy)  # how every later stage compares joules
    tournament: TournamentConfig = Field(default_factory=TournamentConfig)
    labels: LabelsConfig = Field(default_factory=LabelsConfig)  # stage `labels`: gold, a reference, a vote, feedback
    validate_: ValidateConfig = Field(default_factory=ValidateConfig, alias="validate")
    router_data: RouterDataConfig = Field(default_factory=RouterDataConfig)
    sft: SftConfig = Field(default_factory=SftConfig)
    grpo: GrpoConfig = Field(default_factory=GrpoConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)  # the budget curve (stage `budget`)
    router: RouterSection = Field(default_factory=RouterSection)
    baselines: BaselinesConfig = Field(default_factory=BaselinesConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)  # `jouleroute serve`
    replay: ReplayConfig | None = None
    import_outcomes: ImportConfig | None = None  # `import` is a Python keyword
    public_pool: PublicPoolConfig | None = None  # stage `outcomes`: a public outcome pool of the data root

    model_config = StrictModel.model_config | {"populate_by_name": True}

    @model_validator(mode="after")
    def _pool_is_consistent(self) -> "Params":
        ids = [c.candidate_id for c in self.pool]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"pool: candidate_id must be unique, repeated: {dupes}")
        for i, cand in enumerate(self.pool):
            if cand.model not in self.models:
                raise ValueError(f"pool.{i}.model: '{cand.model}' is not a key of `models` ({sorted(self.models)})")
            if cand.answer_style == "loglik" and self.backend.kind != "transformers":
                raise ValueError(f"pool.{i}.answer_style: 'loglik' needs backend.kind 'transformers' (the "
                                 f"'{self.backend.kind}' backend cannot score log-likelihoods); use 'direct' or 'cot'")
            self._check_served(i, cand)
        return self

    def _check_served(self, i: int, cand: CandidateSpec) -> None:
        """A pool entry's server and meter keys need the openai backend; a served entry names its energy."""
        served = self.backend.kind == "openai"
        own = [k for k in ("base_url", "api_key_env", "energy") if getattr(cand, k) is not None]
        if own and not served:
            raise ValueError(f"pool.{i}.{own[0]}: a candidate's own server and meter need backend.kind 'openai' "
                             f"(backend.kind is '{self.backend.kind}')")
        if served and cand.energy is None and not self.energy.served_client_estimate:
            raise ValueError(
                f"pool.{i}.energy: served candidate '{cand.candidate_id}' needs an energy section: exporter_url + "
                "gpus (its GPU node's DCGM exporter or `jouleroute meter`) and reference (an ML.ENERGY model id) "
                "or j_per_output_token for the modelled energy (docs/cluster.md); this client's CPU time is not "
                "its energy (energy.served_client_estimate: true records it anyway, labelled estimated)")

    @model_validator(mode="after")
    def _router_base_is_local(self) -> "Params":
        """The LM router is trained and runs where jouleroute runs: its base model cannot be a served one."""
        spec = self.models.get(self.sft.base_model)
        if spec is not None and spec.source == "served":
            raise ValueError(f"sft.base_model: '{self.sft.base_model}' is a served model (models."
                             f"{self.sft.base_model}.source 'served'), but the router is trained and runs where "
                             "jouleroute runs: give a local folder or a packaged model (a `models` key with source "
                             "pypi-gguf or local)")
        return self

    @model_validator(mode="after")
    def _a_tournament_share_needs_live_rollouts(self) -> "Params":
        """A tournament that runs a share of the train queries (tournament.train_fraction, the one train-share key:
        SFT fits that share) leaves the rest without an outcome: only GRPO's live rollouts can answer them."""
        share = self.tournament.train_fraction
        if share < 1 and self.profile_source == "tournament" and self.grpo.reward_source != "live":
            raise ValueError(f"tournament.train_fraction: {share:g} leaves train queries without an outcome, which "
                             f"grpo.reward_source '{self.grpo.reward_source}' cannot answer; use grpo.reward_source: "
                             "live (it runs them) or tournament.train_fraction: 1")
        return self

    @model_validator(mode="after")
    def _live_rollouts_grade_on_gold(self) -> "Params":
        """Live rollouts (grpo/budget) grade a new answer against the gold answer: labels without gold need the
        profile's own labelled pairs instead."""
        if self.labels.source != "gold" and self.grpo.reward_source == "live":
            raise ValueError(f"grpo.reward_source: 'live' grades new answers against gold answers, but labels.source "
                             f"is {self.labels.source!r}: use grpo.reward_source: profile (the labelled pairs)")
        return self

    @model_validator(mode="after")
    def _reference_is_in_the_pool(self) -> "Params":
        """A reference label source names a candidate of the pool (when params declare one): caught here, not after
        the whole tournament has run."""
        ref, pool = self.labels.reference, self.candidate_ids
        if ref and pool and ref not in pool:
            raise ValueError(f"labels.reference: '{ref}' is not a candidate of the pool (pool: {', '.join(pool)})")
        return self

    @model_validator(mode="after")
    def _lambda_grids_fit(self) -> "Params":
        """GRPO and evaluation may only use λ the router was trained for (router_data.lambdas)."""
        low, high = min(self.router_data.lambdas), max(self.router_data.lambdas)
        grids = {"grpo.lambdas": self.grpo.lambdas or (), "evaluate.lambdas": self.evaluate.lambdas,
                 "router.lam": (self.router.lam,)}
        for name, grid in grids.items():
            outside = [x for x in grid if not low - 1e-12 <= x <= high + 1e-12]
            if outside:
                raise ValueError(f"{name}: {outside} lie outside the router's trained range [{low:g}, {high:g}] "
                                 f"(router_data.lambdas); widen router_data.lambdas or narrow {name}")
        return self

    @model_validator(mode="after")
    def _no_split_read_twice(self) -> "Params":
        """Routers are fitted on train, the champion and its λ chosen on selection data (train and val), and the
        result scored once on test: a setting that lets a fit or a choice read the split it is scored on is refused."""
        split = self.evaluate.split
        if split != "test":
            role = "the routers are fitted on" if split == "train" else "the champion and its λ are chosen on"
            raise ValueError(f"evaluate.split: '{split}' is a split {role}, so its scores would not be held out; "
                             "routers are scored on test only: set evaluate.split: test")
        if self.baselines.train_split == split:
            raise ValueError(f"baselines.train_split: '{split}' is the split the routers are scored on "
                             "(evaluate.split); fit them on train")
        return self

    @property
    def candidate_ids(self) -> list[str]:
        return [c.candidate_id for c in self.pool]


class ParamsError(ValueError):
    """A params file that cannot be used; the message names the file and the key."""


# Keys that moved, and why; a file still holding one fails with the new name. Into `energy_policy:` (issue 20):
# several sections each held a copy that nothing kept in step (GRPO's reward norm and the labels' norm could
# differ). Into `router.lam` (issue 30): the one reference λ, whichever family is champion (the deployed λ is
# chosen for router.target).
MOVED_KEYS = {
    "baselines.lam": "router.lam",
    "gateway.router.lam": "router.lam",
    "router_data.energy_norm": "energy_policy.norm",
    "grpo.energy_norm": "energy_policy.norm",
    "baselines.energy_norm": "energy_policy.norm",
    "router_data.energy_column": "energy_policy.column",
    "baselines.energy_column": "energy_policy.column",
    "evaluate.energy_column": "energy_policy.column",
    "validate.allow_mixed_sources": "energy_policy.allow_mixed_sources",
    "evaluate.allow_mixed_sources": "energy_policy.allow_mixed_sources",
    "router_data.allow_mixed_energy_sources": "energy_policy.allow_mixed_sources",
    "import_outcomes.allow_mixed_sources": "energy_policy.allow_mixed_sources",
}


def moved_keys(raw: dict) -> list[str]:
    """'old is now new' for every moved key the raw params still hold."""
    found = []
    for old, new in MOVED_KEYS.items():
        *sections, key = old.split(".")
        node = raw
        for section in sections:
            node = node.get(section) if isinstance(node, dict) else None
        if isinstance(node, dict) and key in node:
            found.append(f"{old} is now {new}")
    return found


def load_params(path: str | Path = "params.yaml") -> Params:
    """The typed params of ``path``. Its `paths:` are relative to the project root, as in every params file."""
    return _validated(Path(path))


def _validated(path: Path) -> Params:
    path = _shown(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except FileNotFoundError as exc:
        raise ParamsError(f"{path}: not found (run from the repository root, or pass --params)") from exc
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text (byte {exc.start}): a params file is YAML") from None
    except OSError as exc:  # a folder, no permission
        raise ParamsError(f"{path}: cannot be read as a params file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:  # one line: where, and what the parser expected
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ParamsError(f"{path}: not valid YAML{where}: {problem}") from None
    if raw is None or raw == {}:  # every section has defaults, but an empty file is a mistake, not a choice
        raise ParamsError(f"{path}: the file is empty; a params file holds the pipeline's sections (start from a "
                          "copy of params.yaml)")
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: the top level must be a mapping of sections")
    moved = moved_keys(raw)
    if moved:
        raise ParamsError(f"{path}: {'; '.join(moved)} (one place for each: the energy policy of every stage, "
                          "docs/energy.md; router.lam, the reference λ of every router family): move the value there")
    unquoted = yaml_only_value(raw)
    if unquoted:
        raise ParamsError(f"{path}: {unquoted}")
    try:  # strict JSON types (strict.py): YAML's "7" is no int, "yes" no bool; an int is still a float
        return Params.model_validate_json(json.dumps(raw), strict=True, context=STRICT_CONTEXT)
    except ValidationError as exc:
        problems = []
        suggested = set()  # a misspelled key also leaves its right name missing: say it once, as the typo
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "<top>"
            if err["type"] == "extra_forbidden":
                hint = did_you_mean(err["loc"])
                problems.append(f"  - {where}: unknown {'section' if len(err['loc']) == 1 else 'key'}{hint}")
                if hint.startswith(" (did you mean"):
                    suggested.add((*err["loc"][:-1], hint.split("'")[1]))
        for err in exc.errors():
            if err["type"] != "extra_forbidden" and not (err["type"] == "missing" and tuple(err["loc"]) in suggested):
                problems.append(f"  - {problem_line(err)}")
        if len(problems) == 1:  # one line, as every expected error is
            raise ParamsError(f"{path}: {problems[0].removeprefix('  - ')}") from None
        raise ParamsError("\n".join([f"{path}: {len(problems)} problems", *problems])) from None


def _shown(path: Path) -> Path:
    """``path`` as the user knows it: relative to the working directory when it lies below it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return Path(path)


def problem_line(err: dict) -> str:
    """One error as ``key: what is wrong (got value)``. A check across keys (a model validator) names its key in
    its own message and gets no ``got``: its input is a whole section, or the whole params file."""
    where = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if isinstance(value, (dict, list)) and err["type"] == "value_error":
        return f"{where}: {message}" if where else message
    return f"{where or '<top>'}: {message} (got {value!r:.80})"


def did_you_mean(loc: tuple) -> str:
    """' (did you mean 'lam'?)' for an unknown key at ``loc``, from the known keys of the model it sits in."""
    import difflib
    import typing

    from pydantic import BaseModel

    model: type = Params
    for part in loc[:-1]:
        if isinstance(part, int) or not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue  # list index / dict key: the item model was already chosen below
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return ""
        kinds = [field.annotation, *typing.get_args(field.annotation)]
        kinds += [a for k in kinds for a in typing.get_args(k)]  # list[X] / dict[str, X] / X | None
        model = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
        if model is None:
            return ""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ""
    known = [f.alias or n for n, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(known))})"
