"""The single models a user could deploy without a router, chosen by one rule.

- **best single**: the most accurate candidate on the queries given (ties to the cheaper, then the first;
  jouleroute/best_single.py);
- **the single a target picks alone** (``single_for_target``): the cheapest candidate meeting an accuracy target
  (for ``iso_accuracy``: within the tolerance of the best single, the *reference single* a user picks from the
  tournament alone), the most accurate one within an energy share; an ``above_best`` target is met by no single.

Every figure is a mean over the same queries (``[queries, candidates]`` outcomes).
"""

from __future__ import annotations

import numpy as np

from jouleroute.best_single import best_single
from jouleroute.policy.target import Target

_EPS = 1e-12


def best_column(correct: np.ndarray, energy: np.ndarray) -> int:
    """``best_single`` of ``[queries, candidates]`` outcomes."""
    return best_single(correct.mean(axis=0), energy.mean(axis=0))


def single_for_target(target: Target, correct: np.ndarray, energy: np.ndarray, tolerance: float) -> int | None:
    """The column of the single model ``target`` picks alone (module doc); ``None`` when no single meets it."""
    acc, joules = correct.mean(axis=0), energy.mean(axis=0)
    best = best_single(acc, joules)
    share = joules / joules[best] if joules[best] > 0 else np.where(joules > 0, np.inf, 1.0)
    order = range(len(acc))
    if target.kind == "above_best":
        return None
    if target.kind == "energy_share":
        ok = [c for c in order if share[c] <= target.value + _EPS]
        return max(ok, key=lambda c: (float(acc[c]), -float(share[c]), -c)) if ok else None
    floor = acc[best] - tolerance if target.kind == "iso_accuracy" else target.value
    ok = [c for c in order if acc[c] >= floor - _EPS]
    return min(ok, key=lambda c: (float(share[c]), -float(acc[c]), c)) if ok else None


def pick_singles(correct: np.ndarray, energy: np.ndarray, tolerance: float) -> tuple[int, int]:
    """(best, reference) columns: the best single, and the cheapest within ``tolerance`` of it (ties to the more
    accurate): what the default ``iso_accuracy`` target picks alone."""
    best = best_column(correct, energy)
    ref = single_for_target(Target(iso_accuracy=True), correct, energy, tolerance)
    return best, best if ref is None else ref


def singles_on_selection(m, tolerance: float, samples: int, seed: int) -> dict:
    """The best and the reference single on a selection matrix (``candidates``, ``query_ids``, ``correct``,
    ``energy_j``), their figures, and how stable each choice is over ``samples`` bootstrap resamples."""
    from jouleroute.stats import resample_index

    best, ref = pick_singles(m.correct, m.energy_j, tolerance)
    figures = lambda c: {"candidate": m.candidates[c], "accuracy": float(m.correct[:, c].mean()),  # noqa: E731
                         "j_per_query": float(m.energy_j[:, c].mean())}
    out = {"best_single": figures(best), "reference_single": figures(ref), "n_queries": len(m.query_ids),
           "tolerance": tolerance}
    if samples > 0:
        picks = [pick_singles(m.correct[i], m.energy_j[i], tolerance) for i in resample_index(len(m.query_ids),
                                                                                              samples, seed)]
        out["stability"] = {"best_single": float(np.mean([b == best for b, _ in picks])),
                            "reference_single": float(np.mean([r == ref for _, r in picks])), "samples": samples}
    return out


def draws_energy(singles: dict, where: str) -> None:
    """Every energy share is a share of the best single's J/query (``singles_on_selection``): one line naming
    ``where`` (the profile and its energy column) when that is not above 0, as a net-of-idle column can be."""
    best = singles["best_single"]
    if not best["j_per_query"] > 0:
        raise ValueError(f"{where}: the best single {best['candidate']} averages {best['j_per_query']:.4g} J/query "
                         f"over the {singles['n_queries']} selection queries, and every energy share is a share of "
                         "its energy, so it must be above 0 (energy_net_j subtracts idle power: set "
                         "energy_policy.column: energy_j, or check the idle power the profile recorded)")
