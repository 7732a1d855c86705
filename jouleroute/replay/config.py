"""Typed params for the replay stage (RouterBench) and the generic outcome importer.

Every energy number the replay writes is *modelled* from a reference: a measured
ML.ENERGY configuration, or figures the user supplies. Each mapping entry must say
*why* that reference stands in for the model (``reason``), so the choice is
reviewable in ``params.yaml`` rather than buried in code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from jouleroute.replay.pools import get_pool
from jouleroute.strict import StrictModel

CANDIDATE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"  # same rule as jouleroute.pool.CandidateSpec
ROUTERBENCH_TASKS = ("arc_challenge", "mbpp", "winogrande")


class EnergyMapping(StrictModel):
    """Where one model's per-token energy and speed come from.

    Either ``reference`` (a model measured by ML.ENERGY, looked up under
    ``energy.reference_dir`` for ``energy.gpu``) or all three user-supplied figures.
    """

    reference: str | None = None  # ML.ENERGY model id, e.g. "mistralai/Mistral-7B-Instruct-v0.3"
    workload: Literal["chat", "code"] = "chat"  # ML.ENERGY task folder the reference was measured in
    j_per_output_token: float | None = Field(default=None, gt=0)  # user-supplied, instead of a reference
    tpot_s: float | None = Field(default=None, gt=0)  # user-supplied time per output token
    prefill_tokens_per_s: float | None = Field(default=None, gt=0)  # user-supplied prefill speed
    prefill_scale: float = Field(default=1.0, gt=0)  # multiplies energy.prefill_share for this model (say why)
    reason: str = Field(min_length=3)  # why this reference stands in for the model

    @model_validator(mode="after")
    def _one_source(self) -> "EnergyMapping":
        user = (self.j_per_output_token, self.tpot_s, self.prefill_tokens_per_s)
        if self.reference is not None and any(v is not None for v in user):
            raise ValueError("give either 'reference' or the user-supplied figures, not both")
        if self.reference is None and any(v is None for v in user):
            raise ValueError(
                "without 'reference', all of j_per_output_token, tpot_s and prefill_tokens_per_s are required"
            )
        return self


class ReplayModel(EnergyMapping):
    """A RouterBench model in the replay pool: its candidate id and its energy mapping."""

    candidate_id: str = Field(pattern=CANDIDATE_ID_PATTERN)


class EnergyModelConfig(StrictModel):
    """How requests are turned into modelled energy and latency (docs/replay.md)."""

    reference_dir: str = "data/external/energy/mlenergy-v2"
    gpu: str = "H100 80GB HBM3"  # one GPU for every model, so references are comparable
    target_batch_size: int = Field(default=128, gt=0)  # closest measured bs is used (tie: the smaller)
    # Energy of one prompt token as a share of one output token; also sets prefill speed (docs/replay.md).
    prefill_share: float = Field(default=0.15, gt=0, le=1)
    tokenizer_file: str = "data/outcomes/tokenizers/smollm2-135m-instruct/tokenizer.json"


def _default_routerbench_models() -> dict[str, ReplayModel]:
    """The six open-weight RouterBench models and the ML.ENERGY H100 measurement standing in for each."""
    entries = {
        "mistralai/mistral-7b-chat": dict(
            candidate_id="mistral-7b-chat",
            reference="mistralai/Mistral-7B-Instruct-v0.3",
            reason="same model family and size: Mistral-7B-Instruct, v0.3 is the measured revision "
            "(same 7.2B dense GQA architecture, vocabulary grown from 32000 to 32768)",
        ),
        "mistralai/mixtral-8x7b-chat": dict(
            candidate_id="mixtral-8x7b-chat",
            reference="mistralai/Mixtral-8x7B-Instruct-v0.1",
            prefill_scale=0.276,
            reason="the same model (Mixtral-8x7B-Instruct-v0.1). prefill_scale 0.276 = 12.9B active / 46.7B total "
            "parameters: a mixture of experts computes a prompt token with its active experts only, while the "
            "measured (memory-bound) decode cost reflects reading all experts",
        ),
        "meta/llama-2-70b-chat": dict(
            candidate_id="llama-2-70b-chat",
            reference="meta-llama/Meta-Llama-3.1-70B-Instruct",
            reason="closest measured 70B dense Llama on the chat workload: same depth and width as Llama-2-70B "
            "(80 layers, d_model 8192, 8 KV heads); its 128k vocabulary adds ~2% parameters",
        ),
        "zero-one-ai/Yi-34B-Chat": dict(
            candidate_id="yi-34b-chat",
            reference="codellama/CodeLlama-34b-hf",
            workload="code",
            reason="closest measured ~34B dense model: Yi-34B and CodeLlama-34B are both Llama-architecture "
            "34B models with 8 grouped KV heads; no 30-40B chat model is measured on H100 except Gemma-2-27B, "
            "which is smaller and a different architecture",
        ),
        "meta/code-llama-instruct-34b-chat": dict(
            candidate_id="code-llama-34b-instruct",
            reference="codellama/CodeLlama-34b-hf",
            workload="code",
            reason="same architecture and size: the base CodeLlama-34B was measured, the instruct fine-tune "
            "has identical shapes",
        ),
        "WizardLM/WizardLM-13B-V1.2": dict(
            candidate_id="wizardlm-13b",
            reference="codellama/CodeLlama-13b-hf",
            workload="code",
            reason="WizardLM-13B-V1.2 is a Llama-2-13B fine-tune; CodeLlama-13B has the identical architecture "
            "(40 layers, d_model 5120, 40 full KV heads) and is the only 13B Llama measured on H100 "
            "(the 2023 legacy Llama-2-13B figures are A100/A40/V100 only)",
        ),
    }
    return {name: ReplayModel(**entry) for name, entry in entries.items()}


class ReplayConfig(StrictModel):
    """params.yaml `replay:` — replay RouterBench's real outcomes with modelled energy."""

    source_dir: str = "data/external/outcomes/routerbench"
    tasks: tuple[Literal["arc_challenge", "mbpp", "winogrande"], ...] = ROUTERBENCH_TASKS
    val_fraction: float = Field(default=0.1, ge=0, lt=1)  # carved from RouterBench's train split by hash
    # Held-out tasks (the studies/heldout-* presets): when set, the test split is these tasks' RouterBench
    # test rows only, and train/val come from the other tasks' train rows only; every other row is dropped.
    # The router then meets a task at test time that it never saw in training or model selection.
    test_tasks: tuple[Literal["arc_challenge", "mbpp", "winogrande"], ...] = ()
    energy: EnergyModelConfig = EnergyModelConfig()
    models: dict[str, ReplayModel] = Field(default_factory=_default_routerbench_models, min_length=1)
    include_closed: bool = False  # closed APIs have no energy reference; include only with closed_models
    closed_models: dict[str, ReplayModel] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> "ReplayConfig":
        if not self.tasks:
            raise ValueError("replay.tasks is empty")
        outside = [t for t in self.test_tasks if t not in self.tasks]
        if outside:
            raise ValueError(f"replay.test_tasks {outside} are not in replay.tasks {list(self.tasks)}")
        if self.test_tasks and set(self.test_tasks) == set(self.tasks):
            raise ValueError("replay.test_tasks holds out every task in replay.tasks: nothing is left to train on")
        both = sorted(set(self.models) & set(self.closed_models))
        if both:
            raise ValueError(f"models listed in both replay.models and replay.closed_models: {both}")
        for name, entry in self.closed_models.items():
            if entry.reference is not None:
                raise ValueError(
                    f"replay.closed_models.{name}: closed models have no ML.ENERGY reference; "
                    "give j_per_output_token, tpot_s and prefill_tokens_per_s instead"
                )
        ids = [m.candidate_id for m in self.pool().values()]
        dupes = sorted({c for c in ids if ids.count(c) > 1})
        if dupes:
            raise ValueError(f"candidate_id used by more than one model: {dupes}")
        return self

    def pool(self) -> dict[str, ReplayModel]:
        """RouterBench model name -> entry, for every model that will be replayed."""
        return {**self.models, **(self.closed_models if self.include_closed else {})}


class ImportConfig(StrictModel):
    """params.yaml `import_outcomes:` — a user's own outcome table (CSV, JSONL or parquet), see docs/replay.md."""

    input_file: str
    source_name: str = Field(default="import", pattern=CANDIDATE_ID_PATTERN)  # names backend and run_id
    val_fraction: float = Field(default=0.1, ge=0, lt=1)  # used only when the table has no `split` column
    test_fraction: float = Field(default=0.2, ge=0, lt=1)
    energy: EnergyModelConfig = EnergyModelConfig()
    models: dict[str, EnergyMapping] = Field(default_factory=dict)  # candidate -> mapping, for modelled rows
    # a table mixing energy sources must be asked for explicitly: energy_policy.allow_mixed_sources

    @model_validator(mode="after")
    def _fractions(self) -> "ImportConfig":
        if self.val_fraction + self.test_fraction >= 1:
            raise ValueError("import.val_fraction + import.test_fraction must be < 1")
        return self


class PoolModel(EnergyMapping):
    """A model of the public pool: its candidate id and its energy reference (with the reason)."""

    candidate_id: str = Field(pattern=CANDIDATE_ID_PATTERN)


class PoolRule(StrictModel):
    """Which mapped models become candidates, decided on train only (pool_rule.py)."""

    kind: Literal["pareto", "all"] = "pareto"  # pareto: the train accuracy-energy front
    max_candidates: int = Field(default=8, ge=2)


class PublicPoolConfig(StrictModel):
    """params.yaml `public_pool:` — a public outcome pool of the data root, replayed with modelled energy."""

    pool: str  # a pool of the one table, jouleroute/replay/pools/ (its reader, its split rule, its study page)
    source_dir: str  # the pool's folder in the data root (its declared folder, unless you keep a copy elsewhere)
    table: str  # where the import table is written (an output of the `outcomes` stage)
    val_fraction: float = Field(default=0.15, ge=0, lt=1)  # carved from the source's train split by hash
    rule: PoolRule = PoolRule()
    energy: EnergyModelConfig = EnergyModelConfig()
    models: dict[str, PoolModel] = Field(min_length=2)  # the pool's model name -> candidate + reference

    @field_validator("pool")
    @classmethod
    def _declared(cls, name: str) -> str:
        get_pool(name)  # an unknown pool is an error that lists the declared ones
        return name

    @model_validator(mode="after")
    def _unique_candidates(self) -> "PublicPoolConfig":
        ids = [m.candidate_id for m in self.models.values()]
        dupes = sorted({c for c in ids if ids.count(c) > 1})
        if dupes:
            raise ValueError(f"public_pool.models: candidate_id repeated: {dupes}")
        return self
