"""The routers the evaluate stage compares, fitted and scored once: the contest the champion is chosen from.

``fit_contest`` fits every learned baseline family on the train split, loads the trained LM router, scores both
on the test queries (their own overhead metered and made stable, evaluation/overhead.py), adopts per-query
energy where val utility says so (evaluation/query_energy.py) and blends kNN's neighbour evidence into the LM
router where val says so (evaluation/knn_evidence.py). Every choice here is made on val; test is only scored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from jouleroute.evaluation.headline import LM_ALONE  # the LM router without kNN evidence: a diagnostic
from jouleroute.evaluation.outcomes import RouterRun, build_matrix
from jouleroute.evaluation.overhead import cache_key, stable_overhead
from jouleroute.evaluation.val_contest import read_val_rows, val_queries
from jouleroute.routing.blend import blend_scores
from jouleroute.routing.families import learned_families
from jouleroute.routing.registry import build_router, sample_train
from jouleroute.routing.scores import Scores

logger = logging.getLogger(__name__)

ProgressFactory = Callable[[int, str], Callable[[int], None]]


def _no_progress(total: int, label: str) -> Callable[[int], None]:
    return lambda n: None


@dataclass(frozen=True)
class EvaluateSetup:
    """What the library needs of the evaluate stage: its params, the repository root and the folders it reads."""

    params: Any  # the typed params (jouleroute.config.Params, a layer above: only read here)
    root: Path
    grpo_dir: Path
    sft_dir: Path
    router_data_dir: Path
    evaluate_dir: Path
    embedding_cache: Path
    progress: ProgressFactory = _no_progress

    @property
    def lm_router_dir(self) -> Path:
        return self.grpo_dir / "model"

    @property
    def overhead_cache(self) -> Path:
        """Beside the embedding cache: machine-local measurements, not a DVC output (evaluation/overhead.py)."""
        return self.embedding_cache.parent / "overhead"

    @property
    def kept_checkpoint(self) -> str:
        """Which weights ``grpo_dir/model`` holds: grpo's, or sft's when the val guard kept them."""
        path = self.grpo_dir / "metrics.json"
        return json.loads(path.read_text()).get("kept", "grpo") if path.exists() else "grpo"

    def shown(self, path: Path) -> str:
        return str(path.relative_to(self.root) if path.is_relative_to(self.root) else path)


@dataclass
class Contest:
    """Every router evaluate scores on test, as fitted and adopted on val."""

    profile: pd.DataFrame
    queries: pd.DataFrame  # every split (the test split possibly sampled)
    test_queries: pd.DataFrame
    candidates: list[str]
    val_rows: list[dict]
    on_train: bool  # the learned baselines were fitted on train: they may contend on val
    fitted: dict = field(default_factory=dict)  # learned family -> router (per-query energy wrapped in when adopted)
    test_scores: dict[str, Scores] = field(default_factory=dict)
    lm_router: object | None = None
    lm_alone: Scores | None = None  # the LM router's test scores without kNN evidence
    lm_scores: Scores | None = None  # with kNN evidence when val adopted it
    evidence: dict | None = None
    energy_report: dict | None = None
    overhead_keys: dict = field(default_factory=dict)  # router -> what its own per-query cost depends on

    @property
    def blended(self) -> bool:
        return bool(self.evidence and not self.evidence["plain"])

    def runs(self, lambdas: list[float]) -> list[RouterRun]:
        """Every swept family at each λ of the evaluation grid (the LM router alone too when it was blended)."""
        runs = [run for family in self.test_scores for run in swept_runs(family, self.test_scores[family], lambdas)]
        if self.lm_scores is not None:
            if self.blended:
                runs += swept_runs(LM_ALONE, self.lm_alone, lambdas)
            runs += swept_runs("lm", self.lm_scores, lambdas)
        return runs


def swept_runs(family: str, scores: Scores, lambdas: list[float]) -> list[RouterRun]:
    return [RouterRun(swept_name(family, lam), family, lam, scores.decide(lam)) for lam in lambdas]


def swept_name(family: str, lam: float) -> str:
    """A swept router's name, e.g. ``knn:0.05``: the same key in metrics.json, MLflow and the reports
    (MLflow metric names allow ':' but not '@')."""
    return f"{family}:{lam:g}"


def fit_contest(setup: EvaluateSetup, profile: pd.DataFrame, queries: pd.DataFrame, candidates: list[str],
                meter) -> Contest:
    """Fit and score every router on the test split of ``queries`` (module doc); ``meter`` meters their cost."""
    p = setup.params
    test_queries = queries[queries["split"] == p.evaluate.split].sort_values("query_id").reset_index(drop=True)
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": str(setup.embedding_cache)})})
    contest = Contest(profile, queries, test_queries, candidates,
                      val_rows=read_val_rows(setup.router_data_dir / "val.jsonl"),
                      on_train=baselines.train_split == "train")  # fitted on another split, it has seen val
    lm_router = _lm_router(setup, meter)
    if lm_router is not None:  # every router the same way: score once, decide at each λ
        scores = lm_router.score(test_queries, progress=setup.progress(len(test_queries), "LM routing"))
        contest.lm_router = lm_router
        contest.overhead_keys["lm"] = _lm_overhead_key(setup, lm_router, meter)
        contest.lm_scores = stable_overhead(scores, contest.overhead_keys["lm"], setup.overhead_cache)
    learned = [family for family in learned_families() if family in baselines.families]
    tick = setup.progress(len(learned), "baselines (embed, fit, route)") if learned else None
    for family in learned:
        train_profile = sample_train(profile, baselines)
        router = contest.fitted[family] = build_router(family, train_profile, queries, candidates, baselines,
                                                       meter=meter, energy=p.energy_policy, lam=p.router.lam)
        settings = {"baselines": p.baselines.model_dump(mode="json"), "train_rows": len(train_profile)}
        key = contest.overhead_keys[family] = cache_key(family, settings, meter.source, meter.device_info())
        contest.test_scores[family] = stable_overhead(router.score(test_queries), key, setup.overhead_cache)
        tick(1)
    if baselines.query_energy == "auto" and contest.val_rows and contest.on_train:
        _adopt_query_energy(setup, contest)
    contest.lm_alone = contest.lm_scores
    contest.evidence = knn_evidence(setup, contest.lm_router, contest.fitted.get("knn") if contest.on_train
                                    else None, contest.val_rows)
    if contest.lm_scores is not None and contest.blended:
        contest.lm_scores = blend_scores(contest.lm_scores, contest.test_scores["knn"], contest.evidence["weight"],
                                         contest.evidence["energy"])
    return contest


def _adopt_query_energy(setup: EvaluateSetup, contest: Contest) -> None:
    """ê_c(x) fitted on train wraps each router whose mean val utility it raises; their test scores take it."""
    routers = dict(contest.fitted) | ({"lm": contest.lm_router} if contest.lm_router is not None else {})
    adopted, contest.energy_report, predicted = per_query_energy(setup, routers, contest)
    norm = setup.params.energy_policy.norm
    for family, router in adopted.items():
        if router is routers[family]:
            continue
        if family == "lm":
            contest.lm_router = router
            contest.lm_scores = contest.lm_scores.with_energy(predicted[contest.lm_scores.candidates].to_numpy(), norm)
        else:
            contest.fitted[family] = router
            scores = contest.test_scores[family]
            contest.test_scores[family] = scores.with_energy(predicted[scores.candidates].to_numpy(), norm)


def per_query_energy(setup: EvaluateSetup, routers: dict, contest: Contest):
    """Fit ê_c(x) on train (routing/baselines/query_energy.py), measure it on val against the task mean, and wrap
    each router whose mean val utility it raises (evaluation/query_energy.py). Returns (routers, report, ê on
    test as a frame with one column per candidate)."""
    from jouleroute.evaluation.query_energy import adopt_on_val

    p = setup.params
    model = query_energy_model(setup, contest.candidates, contest.profile, contest.queries, p.baselines.train_split)
    asked = val_queries(contest.val_rows)
    matrix = build_matrix(contest.profile, contest.queries[contest.queries["query_id"].isin(set(asked["query_id"]))],
                          "val", p.energy_policy.column)
    lambdas = sorted({float(r["lam"]) for r in contest.val_rows})  # the trained λ grid, as the champion's contest
    train = contest.profile[contest.profile["split"] == p.baselines.train_split]
    adopted, report = adopt_on_val(routers, model, asked, matrix, train, p.energy_policy.column, lambdas,
                                   p.energy_policy.norm)
    logger.info("per-query energy on val: relative error %.3f (task mean %.3f); adopted by %s",
                report["energy_error_val"]["per_query"]["relative_error"],
                report["energy_error_val"]["task_mean"]["relative_error"],
                [f for f, row in report["families"].items() if row["adopted"]] or "no family")
    return adopted, report, pd.DataFrame(model.predict(contest.test_queries), columns=model.candidates)


def query_energy_model(setup: EvaluateSetup, candidates: list[str], profile: pd.DataFrame, queries: pd.DataFrame,
                       split: str):
    """ê_c(x) fitted on the ``split`` rows of ``profile`` (routing/baselines/query_energy.py)."""
    from jouleroute.routing.baselines.embeddings import build_embedder
    from jouleroute.routing.baselines.query_energy import QueryEnergyModel

    p = setup.params
    embedding = p.baselines.embedding.model_copy(update={"cache_dir": str(setup.embedding_cache)})
    model = QueryEnergyModel(candidates, build_embedder(embedding), seed=p.baselines.seed,
                             strip_scaffold=p.baselines.strip_scaffold)
    return model.fit(profile, queries, energy_column=p.energy_policy.column, split=split)


def knn_evidence(setup: EvaluateSetup, lm_router, knn, val_rows: list[dict]) -> dict | None:
    """How much of kNN's neighbour evidence the LM router uses, chosen on val (evaluation/knn_evidence.py);
    ``None`` when there is no LM router, no kNN fitted on train, no val rows or no weight to try."""
    weights = setup.params.evaluate.knn_evidence_weights
    if lm_router is None or knn is None or not val_rows or not any(w > 0 for w in weights):
        return None
    from jouleroute.evaluation.knn_evidence import choose_knn_evidence

    asked = val_queries(val_rows)
    lm_val = lm_router.score(asked, progress=setup.progress(len(asked), "LM routing (val: kNN evidence)"))
    return choose_knn_evidence(lm_val, unmetered_scores(knn, asked), val_rows, setup.params.energy_policy.norm,
                               weights)


def unmetered_scores(router, queries: pd.DataFrame) -> Scores:
    """The router's scores with its meter detached: its decisions count here; its cost is metered on test."""
    meter, router.meter = getattr(router, "meter", None), None
    try:
        return router.score(queries)
    finally:
        router.meter = meter


def _lm_router(setup: EvaluateSetup, meter):
    if not setup.lm_router_dir.exists():
        logger.warning("no GRPO router at %s: the LM router is left out of the evaluation", setup.lm_router_dir)
        return None
    from jouleroute.routing.lm.router import LMRouter

    return LMRouter(setup.lm_router_dir, meter=meter, cfg=setup.params.router)


def _lm_overhead_key(setup: EvaluateSetup, router, meter) -> dict:
    """What the LM router's per-query cost depends on: its architecture, inference settings and prompts,
    not λ, the target nor the trained weights (a λ or target experiment does the same work: it costs the same)."""
    spec = router.spec
    settings = {"architecture": json.loads((router.model_dir / "config.json").read_text()),
                "router": setup.params.router.model_dump(mode="json", exclude={"lam", "target"}),
                "prompt": {"candidates": spec.candidates, "labels": spec.labels,
                           "max_query_tokens": spec.max_query_tokens, "scaffolds": spec.scaffolds}}
    return cache_key("lm", settings, meter.source, meter.device_info())
