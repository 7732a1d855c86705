"""Cascades as policies: a chain chosen per target on selection data (the cascade library's search), its rule
scored out of fold, and the chain scored once on test, each by the package's one rule and one comparison.

- ``choose_chain``: ``meet.meet_target`` over every chain of the search's family (``above_best`` reads the lower
  bounds of the frontier's chains above the best single, ``compare.accuracy_intervals``);
- ``crossfit_targets``: how much of a chosen chain's selection lead survives the choice. Picking one chain of
  thousands flatters its selection figures (the winner's curse), most for rules that stop at the first chain
  clearing a bar. The selection queries are cut into k folds (a seeded permutation); for each fold the best single
  and the chain are chosen on the other k−1 folds exactly as on all of them, and the chain meets the held-out fold
  once. Pooled, every selection query is scored by a chain chosen without it;
- ``score_chain``: the chosen chain and the best single (both chosen on selection) on the test queries
  (``compare.compare``), with the latency, the share stopped at each stage and the energy sources of every call;
- ``decision_figure``: the most accurate chain at or below the best single's energy on selection, scored on test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.cascade.search import ChainSpace, pareto, search
from jouleroute.policy.compare import accuracy_intervals, compare, lower_ends, share_interval
from jouleroute.policy.meet import meet_target
from jouleroute.policy.singles import best_column
from jouleroute.policy.target import Target
from jouleroute.stats import CONFIDENCE, SAMPLES, SEED, paired_mean_ci

_EPS = 1e-12
DECISION_TARGET = Target(energy_share=1.0)


@dataclass
class CascadeChoice:
    """The chain chosen for a target, and its figures on the selection queries."""

    chain: Chain
    target: Target
    met_on_selection: bool
    selection: dict
    reason: str | None = None


def _intervals(space: ChainSpace, m: CascadeMatrix, margin: float, samples: int, confidence: float,
               seed: int) -> list[list[float] | None]:
    """The interval over the best single of every frontier chain above its accuracy by ``margin``; None else."""
    rows = [r for r in pareto(space) if space.accuracy[r] > space.best_accuracy + margin + _EPS]
    out: list[list[float] | None] = [None] * space.accuracy.size
    if rows:
        correct = np.stack([simulate(space.chain(r), m).correct for r in rows], axis=1)
        for r, ci in zip(rows, accuracy_intervals(correct, m.correct[:, space.best], samples, confidence, seed)):
            out[r] = ci
    return out


def choose_chain(space: ChainSpace, m: CascadeMatrix, target: Target, tolerance: float = 0.0,
                 samples: int = SAMPLES, confidence: float = CONFIDENCE, seed: int = SEED) -> CascadeChoice:
    """The chain meeting ``target`` on the selection matrix ``m`` (the one ``space`` was searched on), with its
    selection figures; ``tolerance``: iso_accuracy's, below the best single's accuracy."""
    cis = _intervals(space, m, target.value, samples, confidence, seed) if target.kind == "above_best" else None
    pick = meet_target(target, space.accuracy, space.j_per_query / space.best_j_per_query, space.best_accuracy,
                       tolerance, None if cis is None else lower_ends(cis), what="chain")
    row = pick.index
    chain = space.chain(row)
    outcome = simulate(chain, m)
    if abs(outcome.accuracy - space.accuracy[row]) > 1e-9 or abs(outcome.j_per_query - space.j_per_query[row]) > \
            1e-6 * max(1.0, space.j_per_query[row]):
        raise AssertionError(f"cascade search and simulate disagree on {chain.name}")  # the search's algebra is wrong
    best = space.candidates[space.best]
    selection = {
        "accuracy": outcome.accuracy, "j_per_query": outcome.j_per_query,
        "latency_s": float(outcome.latency_s.mean()), "stop_share": outcome.stop_share(),
        "best_single": {"candidate": best, "accuracy": space.best_accuracy, "j_per_query": space.best_j_per_query},
        "accuracy_diff_vs_best": outcome.accuracy - space.best_accuracy,
        "energy_share_of_best": outcome.j_per_query / space.best_j_per_query,
        "n_queries": space.n_queries, "n_chains": int(space.accuracy.size), "search_seconds": space.seconds,
        "target": {"kind": target.kind, "value": target.value, **({"tolerance": tolerance}
                                                                   if target.kind == "iso_accuracy" else {})},
        "met_on_selection": pick.met,
    }
    if cis is not None and cis[row] is not None:
        selection["accuracy_diff_vs_best_ci"] = cis[row]
    if pick.reason:
        selection["reason"] = pick.reason
    return CascadeChoice(chain, target, pick.met, selection, pick.reason)


def crossfit_targets(m: CascadeMatrix, targets: dict[str, Target], folds: int, tolerance: float,
                     samples: int, confidence: float, seed: int, max_stage_size: int = 2) -> dict[str, dict]:
    """Per target name: its rule's out-of-fold figures on the selection matrix ``m`` (module doc)."""
    n = len(m.query_ids)
    if folds < 2 or n < 2 * folds:
        return {}
    out = crossfit_outcomes(m, targets, folds, tolerance, samples, confidence, seed, max_stage_size)
    return {name: _pooled_figures(o, folds, samples, confidence, seed) for name, o in out.items()}


@dataclass
class OutOfFold:
    """A target's rule scored out of fold, per query of the selection matrix (in its order): the chain's
    correctness and joules, the best single's (chosen on the same other folds) beside them, and each fold's chain."""

    correct: np.ndarray
    energy_j: np.ndarray
    best_correct: np.ndarray
    best_energy_j: np.ndarray
    chains: list[str]  # one per fold


def crossfit_outcomes(m: CascadeMatrix, targets: dict[str, Target], folds: int, tolerance: float, samples: int,
                      confidence: float, seed: int, max_stage_size: int = 2) -> dict[str, OutOfFold]:
    """Per target name: its rule's out-of-fold outcomes on ``m`` (module doc), over the seeded folds the
    deployment cross-fits the routers with (``np.random.default_rng(seed).permutation(n) % folds``)."""
    n = len(m.query_ids)
    fold = np.random.default_rng(seed).permutation(n) % folds
    out = {name: OutOfFold(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), []) for name in targets}
    for f in range(folds):
        rows_in, rows_out = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        inside, held = m.take(rows_in), m.take(rows_out)
        best = best_column(inside.correct, inside.energy_j)
        space = search(inside, inside.candidates[best], max_stage_size=max_stage_size)
        for name, target in targets.items():
            chain = choose_chain(space, inside, target, tolerance, samples, confidence, seed).chain
            outcome, o = simulate(chain, held), out[name]
            o.correct[rows_out], o.energy_j[rows_out] = outcome.correct, outcome.energy_j
            o.best_correct[rows_out], o.best_energy_j[rows_out] = held.correct[:, best], held.energy_j[:, best]
            o.chains.append(chain.name)
    return out


def _pooled_figures(o: OutOfFold, folds: int, samples: int, confidence: float, seed: int) -> dict:
    """The pooled out-of-fold figures: a ratio of sums for the energy share (folds differ in size); their intervals
    over the one resampling of the queries (``stats.resample_index`` with ``seed``), paired with the best single."""
    diff = o.correct - o.best_correct
    out = {"folds": folds, "n_queries": int(diff.size), "accuracy_diff_vs_best": float(diff.mean()),
           "energy_share_of_best": float(o.energy_j.sum() / o.best_energy_j.sum()),
           "chains": dict(Counter(o.chains).most_common())}
    if samples > 0:
        out["accuracy_diff_vs_best_ci"] = paired_mean_ci(diff, samples, seed, confidence)
        out["energy_share_of_best_ci"] = share_interval(o.energy_j, o.best_energy_j, samples, confidence, seed)
    return out


def score_chain(chain: Chain, test: CascadeMatrix, best: str, margin: float, samples: int = SAMPLES,
                confidence: float = CONFIDENCE, seed: int = SEED) -> dict:
    """The chain and the best single (``best``, chosen on selection) on the test matrix (module doc)."""
    outcome = simulate(chain, test)
    column = test.column(best)
    vs = compare(outcome.correct, outcome.energy_j, test.correct[:, column], test.energy_j[:, column], margin,
                 samples, confidence, seed)
    return {"chain": chain.name, "stages": [list(s) for s in chain.stages],
            "max_output_tokens": chain.max_output_tokens, "accuracy": vs["accuracy"],
            "j_per_query": vs["j_per_query"], "latency_s": float(outcome.latency_s.mean()),
            "stop_share": outcome.stop_share(),
            "best_single": {"candidate": best, "accuracy": vs["reference_accuracy"],
                            "j_per_query": vs["reference_j_per_query"]},
            "energy_sources": sorted(outcome.sources), "n_queries": vs["n_queries"], "samples": samples,
            "confidence": confidence, "accuracy_diff_vs_best": vs["accuracy_diff"],
            "accuracy_diff_vs_best_ci": vs["accuracy_diff_ci"], "energy_share_of_best": vs["energy_ratio"],
            "energy_share_of_best_ci": vs["energy_ratio_ci"], "verdict": vs["verdict"], "margin": margin}


def decision_figure(space: ChainSpace, selection: CascadeMatrix, test: CascadeMatrix, margin: float,
                    samples: int = SAMPLES, confidence: float = CONFIDENCE, seed: int = SEED) -> dict:
    """The most accurate chain at or below the best single's energy (chosen on selection), scored on test."""
    choice = choose_chain(space, selection, DECISION_TARGET, samples=0)
    return {"selection": choice.selection,
            "test": score_chain(choice.chain, test, space.candidates[space.best], margin, samples, confidence, seed)}
