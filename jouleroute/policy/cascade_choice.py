"""Cascades as policies: a chain chosen per target on selection data (the cascade library's search), its rule
scored out of fold, and the chain scored once on test, each by the package's one rule and one comparison.

- ``choose_chain``: ``meet.meet_target`` over every chain of the search's family (``above_best`` reads the lower
  bounds of the frontier's chains above the best single, ``compare.accuracy_intervals``);
- ``crossfit_targets``: how much of a chosen chain's selection lead survives the choice. Picking one chain of
  thousands flatters its selection figures (the winner's curse), most for rules that stop at the first chain
  clearing a bar. The selection queries are cut into k folds (a seeded permutation); for each fold the best single
  and the chain are chosen on the other k−1 folds exactly as on all of them, and the chain meets the held-out fold
  once. Pooled, every selection query is scored by a chain chosen without it;
- ``calibrate_slack`` corrects that curse for a floor target (``iso_accuracy``, ``accuracy_floor``): the cheapest
  chain that just clears the floor among thousands clears it by luck, so a chain is chosen a *slack* above the
  floor, the smallest of ``evaluate.cascade.calibration_slacks`` whose rule, scored out of fold on the data the
  choice is made on, still meets the target (for ``iso_accuracy`` with the deployment's admissibility: the lower
  end of its accuracy interval above −margin); the largest when none does. ``crossfit_outcomes`` calibrates inside
  each fold (nested), so the pooled figures score the whole procedure;
- ``score_chain``: the chosen chain and the best single (both chosen on selection) on the test queries
  (``compare.compare``), with the latency, the share stopped at each stage and the energy sources of every call;
- ``decision_figure``: the most accurate chain at or below the best single's energy on selection, scored on test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.cascade.search import ChainSpace, pareto, search
from jouleroute.policy.compare import accuracy_intervals, compare, lower_ends, share_interval
from jouleroute.policy.meet import Pick, meet_target, reaches_floor
from jouleroute.policy.singles import best_column
from jouleroute.policy.target import Target
from jouleroute.stats import CONFIDENCE, SAMPLES, SEED, paired_mean_ci

_EPS = 1e-12
DECISION_TARGET = Target(energy_share=1.0)
FLOOR_KINDS = ("iso_accuracy", "accuracy_floor")  # the targets a chain clears by luck: calibrated


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


def _raised(target: Target, tolerance: float, slack: float) -> tuple[Target, float]:
    """The target and tolerance of a choice ``slack`` accuracy points above a floor target's floor."""
    if not slack or target.kind not in FLOOR_KINDS:
        return target, tolerance
    if target.kind == "iso_accuracy":
        return target, tolerance - slack
    return Target(accuracy_floor=min(1.0, target.value + slack)), tolerance


def choose_chain(space: ChainSpace, m: CascadeMatrix, target: Target, tolerance: float = 0.0,
                 samples: int = SAMPLES, confidence: float = CONFIDENCE, seed: int = SEED,
                 slack: float = 0.0) -> CascadeChoice:
    """The chain meeting ``target`` on the selection matrix ``m`` (the one ``space`` was searched on), with its
    selection figures; ``tolerance``: iso_accuracy's, below the best single's accuracy; ``slack``: a floor target's
    chain is chosen that far above the floor (``calibrate_slack``; the most accurate chain when none is), and
    whether it meets the target is read at the floor itself."""
    cis = _intervals(space, m, target.value, samples, confidence, seed) if target.kind == "above_best" else None
    shares, lower = space.j_per_query / space.best_j_per_query, None if cis is None else lower_ends(cis)
    raised, raised_tolerance = _raised(target, tolerance, slack)
    pick = meet_target(raised, space.accuracy, shares, space.best_accuracy, raised_tolerance, lower, what="chain")
    slack_met = pick.met  # whether any chain reaches the raised floor (else the pick is the most accurate)
    if slack and target.kind in FLOOR_KINDS:  # met and why not: at the target's own floor
        at_floor = meet_target(target, space.accuracy, shares, space.best_accuracy, tolerance, lower, what="chain")
        pick = Pick(pick.index, bool(reaches_floor(space.accuracy[pick.index], space.best_accuracy - tolerance
                                                   if target.kind == "iso_accuracy" else target.value)),
                    at_floor.bound, at_floor.reason)
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
        **({"slack": slack, "slack_met": bool(slack_met)} if target.kind in FLOOR_KINDS else {}),
    }
    if cis is not None and cis[row] is not None:
        selection["accuracy_diff_vs_best_ci"] = cis[row]
    if pick.reason:
        selection["reason"] = pick.reason
    return CascadeChoice(chain, target, pick.met, selection, pick.reason)


def crossfit_targets(m: CascadeMatrix, targets: dict[str, Target], folds: int, tolerance: float,
                     samples: int, confidence: float, seed: int, max_stage_size: int = 2,
                     calibration: Calibration | None = None) -> dict[str, dict]:
    """Per target name: its rule's out-of-fold figures on the selection matrix ``m`` (module doc)."""
    n = len(m.query_ids)
    if folds < 2 or n < 2 * folds:
        return {}
    out = crossfit_outcomes(m, targets, folds, tolerance, samples, confidence, seed, max_stage_size, calibration)
    return {name: _pooled_figures(o, folds, samples, confidence, seed) for name, o in out.items()}


@dataclass(frozen=True)
class Calibration:
    """How a floor target's slack is calibrated (``calibrate_slack``): the slacks tried, the non-inferiority margin
    an ``iso_accuracy`` rule's out-of-fold interval must stay above, and the folds of that cross-fit (the
    deployment's ``evaluate.selection_folds`` wherever a chain is chosen, so every caller picks the same chain)."""

    slacks: tuple[float, ...] = (0.0,)
    margin: float | None = None
    folds: int = 5

    @property
    def on(self) -> bool:
        return len(set(self.slacks)) > 1


@dataclass
class OutOfFold:
    """A target's rule scored out of fold, per query of the selection matrix (in its order): the chain's
    correctness and joules, the best single's (chosen on the same other folds) beside them, and each fold's chain
    and the slack it was chosen with."""

    correct: np.ndarray
    energy_j: np.ndarray
    best_correct: np.ndarray
    best_energy_j: np.ndarray
    chains: list[str]  # one per fold
    slacks: list[float] = field(default_factory=list)  # one per fold


def crossfit_outcomes(m: CascadeMatrix, targets: dict[str, Target], folds: int, tolerance: float, samples: int,
                      confidence: float, seed: int, max_stage_size: int = 2,
                      calibration: Calibration | None = None) -> dict[str, OutOfFold]:
    """Per target name: its rule's out-of-fold outcomes on ``m`` (module doc), over the seeded folds the
    deployment cross-fits the routers with (``np.random.default_rng(seed).permutation(n) % folds``); with
    ``calibration``, each fold's floor targets calibrate their slack on that fold's other folds (nested)."""
    def slack_of(inside: CascadeMatrix) -> dict[str, float]:
        return calibrate_slack(inside, targets, tolerance, samples, confidence, seed, max_stage_size,
                               calibration or Calibration())
    return _crossfit(m, {name: (name, target) for name, target in targets.items()}, folds, tolerance, samples,
                     confidence, seed, max_stage_size, slack_of)


def calibrate_slack(m: CascadeMatrix, targets: dict[str, Target], tolerance: float, samples: int,
                    confidence: float, seed: int, max_stage_size: int = 2,
                    calibration: Calibration = Calibration()) -> dict[str, float]:
    """Per target name: the slack its chain is chosen with on ``m`` (module doc): the smallest of
    ``calibration.slacks`` whose rule meets the target out of fold on ``m`` (over ``calibration.folds`` folds), the
    largest when none does; 0 for a target that is no floor; the smallest when one slack is offered or ``m`` is too
    small for its folds. The rule is judged as the deployment judges it: against the best single on all of ``m``."""
    slacks, folds = sorted(set(calibration.slacks)), calibration.folds
    floors = {name: target for name, target in targets.items() if target.kind in FLOOR_KINDS}
    out = {name: 0.0 for name in targets} | {name: slacks[0] for name in floors}
    if not floors or len(slacks) < 2 or folds < 2 or len(m.query_ids) < 2 * folds:
        return out
    trials = {(name, slack): ((name, slack), target) for name, target in floors.items() for slack in slacks}
    held = _crossfit(m, trials, folds, tolerance, samples, confidence, seed, max_stage_size,
                     lambda inside: {key: key[1] for key in trials})
    best = m.correct[:, best_column(m.correct, m.energy_j)]
    for name, target in floors.items():
        meets = [s for s in slacks if _meets_out_of_fold(target, held[(name, s)].correct, best, tolerance,
                                                         calibration.margin, samples, confidence, seed)]
        out[name] = meets[0] if meets else slacks[-1]
    return out


def _meets_out_of_fold(target: Target, correct: np.ndarray, best: np.ndarray, tolerance: float,
                       margin: float | None, samples: int, confidence: float, seed: int) -> bool:
    """Whether a floor target's rule, out of fold (``correct``), meets it: its pooled accuracy at the floor and,
    for ``iso_accuracy`` with a ``margin``, the deployment's admissibility against ``best`` (the best single's
    outcomes): the lower end of the paired accuracy interval above −margin (the point estimate without resamples)."""
    if target.kind == "accuracy_floor":
        return bool(reaches_floor(correct.mean(), target.value))
    diff = correct - best
    if not reaches_floor(diff.mean(), 0.0, tolerance):
        return False
    lower = paired_mean_ci(diff, samples, seed, confidence)[0] if samples > 0 else diff.mean()
    return margin is None or lower > -margin - _EPS


def _crossfit(m: CascadeMatrix, rules: dict, folds: int, tolerance: float, samples: int, confidence: float,
              seed: int, max_stage_size: int, slack_of) -> dict:
    """Per key of ``rules`` (key: (slack key, target)): the rule's out-of-fold outcomes on ``m``, each fold's chain
    chosen with the slack ``slack_of(inside)[slack key]`` on the fold's other folds."""
    n = len(m.query_ids)
    fold = np.random.default_rng(seed).permutation(n) % folds
    out = {key: OutOfFold(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), []) for key in rules}
    for f in range(folds):
        rows_in, rows_out = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        inside, held = m.take(rows_in), m.take(rows_out)
        best = best_column(inside.correct, inside.energy_j)
        space = search(inside, inside.candidates[best], max_stage_size=max_stage_size)
        slacks = slack_of(inside)
        for key, (slack_key, target) in rules.items():
            chain = choose_chain(space, inside, target, tolerance, samples, confidence, seed, slacks[slack_key]).chain
            outcome, o = simulate(chain, held), out[key]
            o.correct[rows_out], o.energy_j[rows_out] = outcome.correct, outcome.energy_j
            o.best_correct[rows_out], o.best_energy_j[rows_out] = held.correct[:, best], held.energy_j[:, best]
            o.chains.append(chain.name)
            o.slacks.append(slacks[slack_key])
    return out


def _pooled_figures(o: OutOfFold, folds: int, samples: int, confidence: float, seed: int) -> dict:
    """The pooled out-of-fold figures: a ratio of sums for the energy share (folds differ in size); their intervals
    over the one resampling of the queries (``stats.resample_index`` with ``seed``), paired with the best single."""
    diff = o.correct - o.best_correct
    out = {"folds": folds, "n_queries": int(diff.size), "accuracy_diff_vs_best": float(diff.mean()),
           "energy_share_of_best": float(o.energy_j.sum() / o.best_energy_j.sum()),
           "chains": dict(Counter(o.chains).most_common()), "slacks": list(o.slacks)}
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


def choose_calibrated(space: ChainSpace, m: CascadeMatrix, targets: dict[str, Target], tolerance: float,
                      samples: int, confidence: float, seed: int, max_stage_size: int = 2,
                      calibration: Calibration = Calibration()) -> dict[str, CascadeChoice]:
    """Per target name: the chain chosen on all of ``m`` (searched into ``space``), each floor target's at the slack
    calibrated out of fold on ``m`` (``calibrate_slack``)."""
    slacks = calibrate_slack(m, targets, tolerance, samples, confidence, seed, max_stage_size, calibration)
    return {name: choose_chain(space, m, target, tolerance, samples, confidence, seed, slacks[name])
            for name, target in targets.items()}
