"""Stage `evaluate`: score routers already routed on the test split against the profile.

``run_evaluate`` is the one entry point (CLI, DVC and Prefect call it). It
computes every metric for two views of energy -- ``models_only`` (the chosen
candidates) and ``with_overhead`` (plus each router's own measured cost) --
checks that nothing beats the oracle, refuses to compare energy figures with
different energy_source labels unless allowed, sweeps each lambda family for
its phase transition, then writes metrics.json, report.json, report.md,
sweep.csv and plots, and logs them to MLflow when a tracking URI is given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.energy.config import EnergyPolicy
from jouleroute.evaluation.bootstrap import paired_aiq_difference
from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.iso_accuracy import iso_accuracy
from jouleroute.evaluation.frontier import (Point, aiq, check_oracle, cheapest_and_best, pareto_mask, pgr,
                                            savings_captured_pct)
from jouleroute.evaluation.metrics import outcome_metrics
from jouleroute.evaluation.outcomes import (Outcome, ProfileMatrix, RouterRun, build_matrix, oracle_outcome,
                                            router_outcome, single_outcomes)
from jouleroute.evaluation.phase import combined_transition, detect_transition, expensive_candidates

log = logging.getLogger(__name__)

VIEWS = {"models_only": False, "with_overhead": True}
REFERENCE_FAMILY = "lm"  # the family the others are compared with (the evaluate stage's LM router)


class MixedEnergySourcesError(ValueError):
    """Energy figures with different energy_source labels were about to be compared."""


@dataclass
class EvaluationResult:
    metrics: dict  # what metrics.json holds (headline numbers)
    report: dict  # what report.json holds (everything)
    paths: dict[str, Path] = field(default_factory=dict)
    mlflow_run_id: str | None = None


def _source_label(sources: set[str]) -> str:
    return next(iter(sources)) if len(sources) == 1 else "mixed:" + "+".join(sorted(sources))


def _check_sources(view: str, outcomes: list[Outcome], allow_mixed: bool) -> str:
    """The view's single energy_source label; raise (or label 'mixed:') when policies disagree."""
    sources = {s for o in outcomes for s in o.sources(VIEWS[view])}
    if len(sources) <= 1 or allow_mixed:
        return _source_label(sources) if sources else "none"
    by_policy = {o.key: sorted(o.sources(VIEWS[view])) for o in outcomes}
    odd = {n: s for n, s in by_policy.items() if len(s) > 1 or s != by_policy[outcomes[0].key]}
    hint = ("set evaluate.include_overhead: false to compare model energy only, or "
            if view == "with_overhead" else "")
    raise MixedEnergySourcesError(
        f"refusing to compare energy across sources {sorted(sources)} ({view} view): "
        f"e.g. {dict(list(odd.items())[:4])}. "
        f"Joules that were measured, estimated and modelled are not comparable; {hint}"
        "set energy_policy.allow_mixed_sources: true to compare anyway (figures are then labelled 'mixed:...')."
    )


def _families(runs: list[RouterRun], cfg: EvaluateConfig) -> dict[str, list[RouterRun]]:
    """Lambda families, members sorted by lambda; each must be run at exactly cfg.lambdas."""
    fams: dict[str, list[RouterRun]] = {}
    for run in runs:
        fams.setdefault(run.family, []).append(run)
    swept = {}
    for fam, members in fams.items():
        lams = [r.lam for r in members]
        if all(lam is None for lam in lams):
            continue
        if any(lam is None for lam in lams):
            raise ValueError(f"family '{fam}' mixes runs with and without lambda: {[r.name for r in members]}")
        same = len(lams) == len(cfg.lambdas) and np.allclose(sorted(lams), cfg.lambdas, rtol=1e-9, atol=0)
        if not same:
            raise ValueError(f"family '{fam}' was run at lambda={sorted(lams)} but evaluate.lambdas is "
                             f"{list(cfg.lambdas)}; route each lambda of the sweep exactly once")
        swept[fam] = sorted(members, key=lambda r: r.lam)
    return swept


def _score_view(view: str, m: ProfileMatrix, singles: list[Outcome], oracle: Outcome, routers: list[Outcome],
                families: dict[str, list[RouterRun]], cfg: EvaluateConfig, label: str) -> tuple[dict, dict, dict]:
    """Metrics of every policy in one view: (view summary, {policy key: metrics}, {family: AIQ block})."""
    with_overhead = VIEWS[view]
    everyone = singles + [oracle] + routers
    boot = (cfg.bootstrap_samples, cfg.confidence, cfg.seed)
    metrics = {o.key: outcome_metrics(o, m.tasks, m.candidates, with_overhead, boot) for o in everyone}
    for o in everyone:  # equals `label` unless mixed sources were allowed
        metrics[o.key]["energy_source"] = _source_label(set(o.sources(with_overhead)))
    point = {o.key: Point(o.name, metrics[o.key]["j_per_query"], metrics[o.key]["accuracy"]) for o in everyone}
    single_pts = [point[o.key] for o in singles]
    if view == "models_only":  # overhead only adds energy, so this view is the strict test
        check_oracle(point[oracle.key], single_pts + [point[o.key] for o in routers])
    cheapest, best = cheapest_and_best(single_pts)
    cost_range = (min(p.energy for p in single_pts), max(p.energy for p in single_pts))

    def aiq_with(extra: list[Point]) -> float:
        pts = single_pts + extra
        return aiq(np.array([p.energy for p in pts]), np.array([p.accuracy for p in pts]), cost_range)

    zero_router = aiq_with([])
    comparable = singles + routers  # the oracle is not attainable, so it stays off the frontier
    on_front = dict(zip([o.key for o in comparable], pareto_mask([point[o.key] for o in comparable])))
    for o in everyone:
        p = point[o.key]
        metrics[o.key].update(
            aiq=aiq_with([p]),  # for a single this is the zero-router AIQ: it is already on the hull
            pgr=pgr(p.accuracy, cheapest, best),
            savings_captured_pct=savings_captured_pct(p.accuracy, p.energy, best, point[oracle.key],
                                                      cfg.accuracy_tolerance),
            on_frontier=on_front.get(o.key))
    summary = {"energy_source": label, "cheapest_single": cheapest.name, "best_single": best.name,
               "cost_range_j_per_query": list(cost_range), "aiq_zero_router": zero_router}
    fam_aiq = {fam: aiq_with([point[f"router:{r.name}"] for r in members]) for fam, members in families.items()}
    return summary, metrics, {f: {"aiq": a, "aiq_lift": a - zero_router} for f, a in fam_aiq.items()}


def evaluate_outcomes(m: ProfileMatrix, runs: list[RouterRun], cfg: EvaluateConfig,
                      energy: EnergyPolicy = EnergyPolicy()) -> dict:
    """Everything that goes into report.json, computed from the aligned profile and the router runs
    (``m`` read from the column ``energy.column``; ``energy``: params ``energy_policy``)."""
    names = [r.name for r in runs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"router names must be unique; repeated: {repeated}")
    singles, oracle = single_outcomes(m), oracle_outcome(m)
    routers = [router_outcome(m, r) for r in runs]
    families = _families(runs, cfg)
    headline = "with_overhead" if cfg.include_overhead else "models_only"
    report: dict = {"split": cfg.split, "n_queries": len(m.query_ids), "candidates": m.candidates,
                    "tasks": sorted(set(m.tasks)), "energy_column": energy.column, "headline_view": headline,
                    "views": {}, "singles": {}, "oracle": {}, "routers": {},
                    "families": {f: {"views": {}} for f in families}}
    everyone = singles + [oracle] + routers
    for view in VIEWS:
        try:
            label = _check_sources(view, everyone, energy.allow_mixed_sources)
        except MixedEnergySourcesError:
            if view == headline or view == "models_only":  # only the overhead view may be left out
                raise
            report["views"][view] = {"skipped": "router overhead is metered with another energy_source"}
            continue
        report["views"][view], metrics, fam_aiq = _score_view(view, m, singles, oracle, routers, families, cfg,
                                                              label)
        for o in everyone:
            bucket = {"single": report["singles"], "router": report["routers"]}.get(o.kind)
            entry = report["oracle"] if bucket is None else bucket.setdefault(o.name, {})
            if "views" not in entry:
                entry.update(kind=o.kind, family=o.family, lam=o.lam, overhead_energy_source=o.overhead_source,
                             views={})
            entry["views"][view] = metrics[o.key]
        for fam, block in fam_aiq.items():
            report["families"][fam]["views"][view] = block
    report["expensive_candidates"] = _sweeps(report, families, cfg, headline)
    if REFERENCE_FAMILY in families and len(families) > 1 and cfg.bootstrap_samples > 0:
        report["aiq_difference"] = _aiq_difference(singles, routers, families, cfg, headline)
    report["iso_accuracy"] = _iso_accuracy(report, singles, oracle, routers, families, cfg, headline)
    return report


def _iso_accuracy(report: dict, singles: list[Outcome], oracle: Outcome, routers: list[Outcome],
                  families: dict[str, list[RouterRun]], cfg: EvaluateConfig, view: str) -> dict:
    """Each family's (and each other router's) cheapest point at the best single's accuracy − tolerance, as a
    share of the best single's energy, and the share of the oracle's savings it captures (iso_accuracy.py)."""
    with_overhead = VIEWS[view]
    best = next(o for o in singles if o.name == report["views"][view]["best_single"])
    by_name = {o.name: o for o in routers}
    stack = lambda outs: (np.stack([o.correct for o in outs], axis=1),
                          np.stack([o.energy(with_overhead) for o in outs], axis=1), [o.name for o in outs])
    policies = {fam: stack([by_name[r.name] for r in members]) for fam, members in families.items()}
    policies |= {o.name: stack([o]) for o in routers if o.family not in families}
    block = iso_accuracy(best.correct, best.energy(with_overhead), oracle.energy(with_overhead), policies,
                         cfg.accuracy_tolerance, cfg.bootstrap_samples, cfg.confidence, cfg.seed)
    return {**block, "best_single": best.name, "view": view}


def _aiq_difference(singles: list[Outcome], routers: list[Outcome], families: dict[str, list[RouterRun]],
                    cfg: EvaluateConfig, view: str) -> dict:
    """The LM router's energy-AIQ minus each other family's, with paired-bootstrap intervals (bootstrap.py)."""
    with_overhead = VIEWS[view]
    by_name = {o.name: o for o in routers}
    pick = lambda outs, what: np.stack([getattr(o, what) if what == "correct" else o.energy(with_overhead)
                                        for o in outs], axis=1)
    swept = {fam: [by_name[r.name] for r in members] for fam, members in families.items()}
    result = paired_aiq_difference(pick(singles, "correct"), pick(singles, "energy"),
                                   {f: (pick(o, "correct"), pick(o, "energy")) for f, o in swept.items()},
                                   REFERENCE_FAMILY, cfg.bootstrap_samples, cfg.confidence, cfg.seed)
    return {**result, "view": view}


def _sweeps(report: dict, families: dict[str, list[RouterRun]], cfg: EvaluateConfig, view: str) -> list[str]:
    """Fill report['families'][f]['sweep'/'transitions']; return the expensive candidates used."""
    single_j = {c: s["views"][view]["j_per_query"] for c, s in report["singles"].items()}
    expensive = expensive_candidates(single_j, cfg.expensive_rule)
    for fam, members in families.items():
        rows = [report["routers"][r.name]["views"][view] for r in members]
        sweep = {"lam": [r.lam for r in members], "router": [r.name for r in members],
                 "accuracy": [x["accuracy"] for x in rows], "j_per_query": [x["j_per_query"] for x in rows],
                 "expensive_share": [sum(x["share"][c] for c in expensive) for x in rows]}
        lam = np.asarray(sweep["lam"])
        transitions = {k: detect_transition(lam, np.asarray(sweep[k]), cfg.min_transition_change).to_dict()
                       for k in ("accuracy", "expensive_share")}
        # J/query lives on its own scale: relative change, so "min_change" means the same fraction.
        energy = np.asarray(sweep["j_per_query"])
        transitions["j_per_query"] = detect_transition(lam, energy / max(energy.max(), 1e-300),
                                                       cfg.min_transition_change).to_dict()
        transitions["combined"] = combined_transition(
            lam, [np.asarray(sweep["accuracy"]), np.asarray(sweep["expensive_share"])],
            cfg.min_transition_change).to_dict()
        report["families"][fam].update(sweep=sweep, transitions=transitions,
                                       lambda_star=transitions["combined"]["lambda_star"],
                                       lambda_star_per_task=_per_task_lambda_star(rows, lam, expensive, cfg))
    return expensive


def _per_task_lambda_star(rows: list[dict], lam: np.ndarray, expensive: list[str], cfg: EvaluateConfig) -> dict:
    """λ* of the family on each task alone: the same combined detector on the task's accuracy and expensive
    share against λ (None where neither changes by evaluate.min_transition_change)."""
    out = {}
    for task in sorted(rows[0]["per_task"]) if rows else []:
        per = [r["per_task"][task] for r in rows]
        curves = [np.array([x["accuracy"] for x in per]),
                  np.array([sum(x["share"][c] for c in expensive) for x in per])]
        out[task] = combined_transition(lam, curves, cfg.min_transition_change).lambda_star
    return out


def run_evaluate(
    profile: pd.DataFrame | Path,
    queries: pd.DataFrame | Path,
    runs: list[RouterRun],
    cfg: EvaluateConfig,
    out_dir: Path,
    run_tags: dict[str, str] | None = None,
    run=None,
    val_contest: dict | None = None,
    energy: EnergyPolicy = EnergyPolicy(),
    deployment: dict | None = None,
    labels: dict | None = None,
) -> EvaluationResult:
    """Evaluate ``runs`` on split ``cfg.split``; write outputs under ``out_dir``; log into ``run`` (the stage's
    MLflow run, ``tracking.StageRun``) when given. ``run_tags``: the provenance written into the report.
    ``val_contest``: the router champion chosen on val (val_contest.py), reported beside the test figures.
    ``energy`` (params ``energy_policy``): the energy column compared, and whether sources may mix.
    ``deployment``: the deployed point's choices on selection data (evaluation/deployment.py); ``runs`` then
    holds its test decisions as the router ``deployed``, scored against the best and the reference single.
    ``labels``: which labels trained the policy and what test was scored on (stages/evaluate.py), reported as is."""
    from jouleroute.evaluation.report import clean, write_outputs  # matplotlib import only when writing

    profile = pd.read_parquet(profile) if isinstance(profile, (str, Path)) else profile
    queries = pd.read_parquet(queries) if isinstance(queries, (str, Path)) else queries
    matrix = build_matrix(profile, queries, cfg.split, energy.column)
    report = clean(evaluate_outcomes(matrix, runs, cfg, energy))
    report["config"] = cfg.model_dump(mode="json")
    report["energy_policy"] = energy.model_dump(mode="json")
    report["provenance"] = dict(run_tags or {})
    if labels:
        report["labels"] = clean(labels)
    if val_contest:
        report["val_contest"] = clean(val_contest)
        champion = val_contest.get("winner", {}).get("family")
        if champion in report["iso_accuracy"]["policies"]:  # the champion's hindsight bound, as its family's
            report["iso_accuracy"]["champion"] = {"family": champion, "name": val_contest["winner"].get("name"),
                                                  **report["iso_accuracy"]["policies"][champion]}
    if deployment:
        from jouleroute.evaluation.deployed import DEPLOYED, deployed_block
        from jouleroute.evaluation.outcomes import cascade_outcome, router_outcome

        from jouleroute.policy.kinds import kind_of

        outcome = (cascade_outcome(profile, matrix, deployment["deployed"]) if kind_of(deployment).picks is None
                   else router_outcome(matrix, next(r for r in runs if r.name == DEPLOYED)))
        report["deployed"] = clean(deployed_block(matrix, outcome, deployment, VIEWS[report["headline_view"]],
                                                  cfg.noninferiority_margin, cfg.bootstrap_samples, cfg.confidence,
                                                  cfg.seed))
    if cfg.cascade.enabled:
        from jouleroute.evaluation.cascades import cascade_block

        best = deployment["singles"]["best_single"]["candidate"] if deployment else None
        router_target = (deployment["target"], deployment["floor_or_share"]) if deployment else None
        report["cascade"] = clean(cascade_block(profile, queries, matrix, energy.column, best, cfg.accuracy_tolerance,
                                                cfg.noninferiority_margin, cfg.bootstrap_samples, cfg.confidence, cfg.seed, cfg.cascade,
                                                router_target, cfg.selection_folds))
    metrics, paths = write_outputs(report, Path(out_dir), cfg)
    result = EvaluationResult(metrics=metrics, report=report, paths=paths)
    if run is not None:
        from jouleroute.evaluation.mlflow_log import log_evaluation  # mlflow import is slow; only when used

        result.mlflow_run_id = log_evaluation(result, run)
    log.info("evaluated %d routers on %d %s queries", len(runs), len(matrix.query_ids), cfg.split)
    return result
