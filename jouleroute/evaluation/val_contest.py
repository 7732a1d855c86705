"""Choose the router to deploy on val: the family and checkpoint with the best mean val utility; among those
tied with it (a paired CI that holds 0), the one that spends least at the best single model's val accuracy
(``evaluate.champion_by: iso_accuracy``, the default; ``utility`` keeps the utility order alone).

Every contender is scored the same way, by ``label_accuracy`` (the held-out check of the sft and grpo
stages) on router_data's ``val.jsonl``: one row per (val query, λ of the trained grid), with every
candidate's real outcome and energy. A contender's figure at λ is the mean over the val queries of

    correct(chosen) − λ · normalized energy(chosen)        (``routing.utility``, ``energy_policy.norm``)

and its val utility is the mean over the trained λ grid. Its val points are (accuracy, J/query) of its
choices at each λ of that grid; its val iso-accuracy share is the energy of its cheapest point whose accuracy
is at least the best single model's on val minus ``evaluate.accuracy_tolerance``, as a share of that model's
energy (1.0 when no point reaches it: the user would deploy the best single), the figure a user decides by
(docs/metrics.md, "Iso-accuracy saving"). The LM router's checkpoints (sft, and grpo
when its weights were kept) bring the figures their stages measured; a learned baseline, fitted on
the train split, is scored once on the val queries (``Router.score``) and decided at each λ. The test
split is never an input: the val rows come from router_data, which drops test on entry.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from jouleroute.evaluation.label_eval import label_accuracy, load_rows
from jouleroute.best_single import best_single
from jouleroute.policy.meet import iso_accuracy_point
from jouleroute.routing.base import Router, RoutingDecisions, Scores
from jouleroute.stats import paired_mean_ci, resample_index

logger = logging.getLogger(__name__)

FIT = "fit"  # the checkpoint name of a baseline: fitted on the train split when the stage runs


@dataclass(frozen=True)
class Contender:
    family: str
    checkpoint: str  # "sft" / "grpo" for the LM router, "fit" for a learned baseline
    by_lambda: dict[str, float]  # λ (as val.jsonl writes it) -> mean val utility
    model_dir: str | None = None  # where the LM router's weights are (None for a baseline)
    note: str = field(default="", compare=False)
    # the LM router with kNN's neighbour evidence (evaluation/knn_evidence.py): {"weight", "energy"}
    knn_evidence: dict | None = None
    # val query -> its mean utility over the λ grid (label_accuracy's per_query_utility): the margin's CI
    per_query: dict[str, float] | None = field(default=None, compare=False, repr=False)
    # λ -> (accuracy, mean J/query) of its choices on val: its iso-accuracy share (None: not measured)
    points: dict[str, tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.family if self.checkpoint == FIT else f"{self.family}/{self.checkpoint}"

    @property
    def val_utility(self) -> float:
        return float(np.mean(list(self.by_lambda.values())))


class Decided(Router):
    """A router whose scores are already known: ``route`` decides them for the rows it is given."""

    def __init__(self, scores: Scores):
        super().__init__(scores.candidates)
        self.scores, self.position = scores, {q: i for i, q in enumerate(scores.query_ids)}

    def score(self, queries: pd.DataFrame) -> Scores:
        return self.scores

    def route(self, queries: pd.DataFrame, lam: float | None = None) -> RoutingDecisions:
        picks = self.scores.choices(lam)
        chosen = [self.scores.candidates[picks[self.position[q]]] for q in queries["query_id"].astype(str)]
        return RoutingDecisions(list(queries["query_id"].astype(str)), chosen)


def val_queries(val_rows: Sequence[Mapping]) -> pd.DataFrame:
    """The val queries of the rows (one per query, in first-seen order): what a router reads."""
    frame = pd.DataFrame(list(val_rows))
    return frame.drop_duplicates("query_id")[["query_id", "task", "question"]].reset_index(drop=True)


def by_lambda(check: dict) -> dict[str, float]:
    return {lam: float(row["router_utility"]) for lam, row in check.get("by_lambda", {}).items()}


def points_of(check: dict) -> dict[str, tuple[float, float]] | None:
    """λ -> (accuracy, mean J/query) of the choices a held-out check scored; ``None`` for an older output."""
    rows = check.get("by_lambda", {})
    if not rows or any("chosen_accuracy" not in r or "chosen_mean_energy_j" not in r for r in rows.values()):
        return None
    return {lam: (float(r["chosen_accuracy"]), float(r["chosen_mean_energy_j"])) for lam, r in rows.items()}


def val_reference(rows: Sequence[Mapping]) -> dict | None:
    """The best single model on the val queries of ``rows``: the highest mean (expected) correctness, ties to
    the lower mean energy; its accuracy and J/query. ``None`` without rows."""
    first = pd.DataFrame(list(rows)).drop_duplicates("query_id") if rows else None
    if first is None or first.empty:
        return None
    correct = pd.DataFrame(list(first["correct_by_candidate"])).astype(float).mean()
    energy = pd.DataFrame(list(first["energy_by_candidate"])).astype(float).mean()
    best = correct.index[best_single(correct.to_numpy(), energy[correct.index].to_numpy())]
    return {"candidate": str(best), "accuracy": float(correct[best]), "j_per_query": float(energy[best])}


def iso_share(contender: Contender, reference: dict | None, tolerance: float) -> float | None:
    """The contender's val iso-accuracy energy share (module doc); ``None`` without its points or a reference."""
    if not contender.points or not reference or reference["j_per_query"] <= 0:
        return None
    acc, j = zip(*contender.points.values())
    return float(iso_accuracy_point([acc], [j], reference["accuracy"], reference["j_per_query"], tolerance)[2][0])


def baseline_contender(family: str, router: Router, val_rows: Sequence[Mapping], energy_norm: str) -> Contender:
    """A fitted baseline scored once on the val queries, decided at every λ of the rows."""
    meter = getattr(router, "meter", None)
    router.meter = None  # its decisions are what count here; its own cost is metered on test
    try:
        scores = router.score(val_queries(val_rows))
    finally:
        router.meter = meter
    check = label_accuracy(Decided(scores), val_rows, energy_norm=energy_norm)
    return Contender(family, FIT, by_lambda(check), per_query=check.get("per_query_utility"), points=points_of(check))


def lm_contenders(grpo_metrics: dict, model_dirs: Mapping[str, Path], root: Path) -> list[Contender]:
    """The LM router's checkpoints with the held-out figures the grpo stage measured: sft, and grpo when
    its weights were kept (otherwise ``grpo_dir/model`` holds the sft weights: one contender, not two)."""
    checks = {"sft": grpo_metrics.get("heldout_sft")}
    if grpo_metrics.get("kept", "grpo") == "grpo":
        checks["grpo"] = grpo_metrics.get("heldout")
    out = []
    for name, check in checks.items():
        model_dir = Path(model_dirs[name])
        if not check or not (model_dir / "config.json").is_file():
            logger.warning("selection: no %s LM router (held-out figures or weights at %s missing); left out",
                           name, model_dir)
            continue
        shown = model_dir.relative_to(root) if model_dir.is_relative_to(root) else model_dir
        out.append(Contender("lm", name, by_lambda(check), str(shown), per_query=check.get("per_query_utility"),
                             points=points_of(check)))
    return out


CI_SAMPLES, CI_SEED = 1000, 0
TIE_RULE = ("the higher mean val utility is deployed; an exact tie goes to the first listed (the LM router's "
            "checkpoints, then the baselines)")
ISO_RULE = ("among the contenders tied with the best mean val utility (the paired 95% CI of the margin holds 0), "
            "the lower val iso-accuracy energy share is deployed (the energy of the cheapest val point within "
            "evaluate.accuracy_tolerance of the best single model's val accuracy, as a share of its energy); equal "
            "shares go to the higher mean val utility, then to the first listed")


def margin_ci(win: Contender, other: Contender, samples: int = CI_SAMPLES, seed: int = CI_SEED) -> list[float] | None:
    """95% paired-bootstrap interval of mean(win − other) over the val queries both were scored on (the same
    resamples of queries for both); ``None`` when either has no per-query figures (an older grpo output)."""
    if not win.per_query or not other.per_query:
        return None
    queries = sorted(set(win.per_query) & set(other.per_query))
    if not queries:
        return None
    return paired_mean_ci([win.per_query[q] - other.per_query[q] for q in queries], samples, seed)


def _tied(best: Contender, other: Contender) -> bool:
    """``other`` is within noise of ``best`` (the higher mean val utility): the paired CI of the margin holds 0,
    or, without per-query figures, the two figures are equal."""
    ci = margin_ci(best, other)
    return ci[0] <= 0 if ci is not None else abs(best.val_utility - other.val_utility) <= 1e-12


def _ci_fields(prefix: str, win: Contender, other: Contender | None) -> dict:
    ci = margin_ci(win, other) if other is not None else None
    return {f"{prefix}_ci95": ci, f"{prefix}_is_tie": None if ci is None else bool(ci[0] <= 0 <= ci[1])}


def select(contenders: Sequence[Contender], energy_norm: str, n_val_queries: int, rule: str = "utility",
           reference: dict | None = None, tolerance: float = 0.01) -> dict:
    """The best contender by ``rule`` (``utility``: mean val utility; ``iso_accuracy``: val iso-accuracy share,
    then mean val utility), the runner-up and the margins (in mean val utility, with their paired CIs)."""
    if not contenders:
        raise ValueError("no contender to select from")
    grids = {c.name: sorted(c.by_lambda, key=float) for c in contenders}
    first = next(iter(grids.values()))
    odd = {n: g for n, g in grids.items() if g != first}
    if odd:
        raise ValueError(f"contenders were scored on different λ grids: {first} vs {odd}; rerun router_data, sft "
                         "and grpo so that every figure comes from the same val.jsonl")
    if rule not in ("iso_accuracy", "utility"):
        raise ValueError(f"unknown champion rule '{rule}'; valid: iso_accuracy, utility")
    shares = {c.name: iso_share(c, reference, tolerance) for c in contenders}
    ranked = sorted(contenders, key=lambda c: -c.val_utility)  # stable: ties keep the given order
    best = ranked[0]
    tied = [c for c in ranked if c is best or _tied(best, c)]
    if rule == "iso_accuracy":  # among the utility ties, the lower val share; no val points: no saving shown
        share = lambda c: round(1.0 if shares[c.name] is None else shares[c.name], 9)  # noqa: E731
        tied = sorted(tied, key=share)  # stable: equal shares keep the utility order
        ranked = tied + [c for c in ranked if all(c is not t for t in tied)]
    win = ranked[0]
    others = [c for c in ranked if c.family != win.family]
    out = {"winner": {"name": win.name, "family": win.family, "checkpoint": win.checkpoint,
                      "val_utility": win.val_utility, "model_dir": win.model_dir,
                      "knn_evidence": win.knn_evidence, "iso_share_val": shares[win.name]},
           "rule": rule, "val_reference": reference, "accuracy_tolerance": tolerance,
           "tied_on_utility": [c.name for c in tied],
           "best_on_utility": {"name": best.name, "val_utility": best.val_utility},
           "runner_up": ranked[1].name if len(ranked) > 1 else None,
           "margin": win.val_utility - ranked[1].val_utility if len(ranked) > 1 else None,
           "best_other_family": others[0].name if others else None,
           "margin_over_other_family": win.val_utility - others[0].val_utility if others else None,
           **_ci_fields("margin", win, ranked[1] if len(ranked) > 1 else None),
           **_ci_fields("margin_over_other_family", win, others[0] if others else None),
           "ci": {"samples": CI_SAMPLES, "seed": CI_SEED, "confidence": 0.95},
           "tie_rule": ISO_RULE if rule == "iso_accuracy" else TIE_RULE,
           "lambdas": [float(x) for x in first], "energy_norm": energy_norm, "n_val_queries": n_val_queries,
           "stability": first_on_utility_share(win, contenders),
           "contenders": [{"name": c.name, "family": c.family, "checkpoint": c.checkpoint,
                           "val_utility": c.val_utility, "iso_share_val": shares[c.name],
                           "utility_gap": c.val_utility - best.val_utility,  # to the best mean val utility
                           "utility_gap_ci95": None if c is best else margin_ci(c, best),
                           "by_lambda": dict(c.by_lambda)} for c in ranked]}
    logger.info("champion on val (%s): %s (iso-accuracy share %s, mean val utility %.4f; runner-up %s, margin %s)",
                rule, win.name, "n/a" if shares[win.name] is None else f"{shares[win.name]:.3f}", win.val_utility,
                out["runner_up"], "n/a" if out["margin"] is None else f"{out['margin']:+.4f}")
    return out


def first_on_utility_share(win: Contender, contenders: Sequence[Contender], samples: int = CI_SAMPLES,
                           seed: int = CI_SEED) -> dict | None:
    """How stable the choice is: the share of bootstrap resamples of the val queries on which the champion's mean
    val utility is at least every other contender's (the same resamples for all); ``None`` without per-query
    figures. Under ``champion_by: iso_accuracy`` a champion picked among utility ties can score low here: the
    val split cannot tell them apart."""
    rivals = [c for c in contenders if c is not win]
    if not win.per_query or any(not c.per_query for c in rivals):
        return None
    queries = sorted(set(win.per_query).intersection(*(set(c.per_query) for c in rivals)))
    if not queries:
        return None
    table = np.array([[c.per_query[q] for q in queries] for c in [win, *rivals]])  # [contenders, queries]
    means = table[:, resample_index(len(queries), samples, seed)].mean(axis=2)  # [contenders, samples]
    return {"first_on_utility": float(np.mean(means[0] >= means.max(axis=0) - 1e-12)), "samples": samples}


def read_val_rows(val_path: Path) -> list[dict]:
    """router_data's val rows (one per val query and trained λ); empty when there are none."""
    rows = load_rows(val_path) if Path(val_path).exists() else []
    if not rows:
        logger.warning("selection: no val rows at %s; no champion is chosen", val_path)
    return rows


def choose(rows: Sequence[Mapping], grpo_metrics_path: Path, lm_model_dirs: Mapping[str, Path],
           baselines: Mapping[str, Router], energy_norm: str, root: Path,
           extra: Sequence[Contender] = (), rule: str = "utility", tolerance: float = 0.01) -> dict | None:
    """Select on the val ``rows`` by ``rule``: the LM's held-out figures, the fitted ``baselines`` scored on
    val, and ``extra`` contenders scored by the caller (the LM router with kNN evidence). ``None`` without rows."""
    if not rows:
        return None
    metrics = json.loads(Path(grpo_metrics_path).read_text()) if Path(grpo_metrics_path).exists() else {}
    contenders = lm_contenders(metrics, lm_model_dirs, root)
    contenders += [baseline_contender(f, router, rows, energy_norm) for f, router in baselines.items()]
    contenders += list(extra)
    return select(contenders, energy_norm, len({r["query_id"] for r in rows}), rule, val_reference(rows), tolerance)
