"""What to deploy across kinds, decided on selection data with its uncertainty: one rule for every kind.

Every deployable policy comes as ``PolicyOutcomes``: per selection query its correctness and joules (every call,
its own cost included), the best single's on the same queries beside them, and its settings (a router family's λ,
a cascade's stages, a model). A policy chosen on the very queries it is scored on (a router's λ, a cascade's chain)
brings out-of-fold outcomes, so its figures carry no winner's curse. ``choose_across_kinds`` then

1. scores each against the best single with the one paired comparison (policy/compare.py);
2. for the default ``iso_accuracy`` target admits a policy other than the best single only when the lower end of
   that accuracy interval lies above −margin (a cheaper policy replaces the best single only when selection's
   uncertainty allows it, not by its point estimate);
3. meets the target by the one rule (policy/meet.py) across every admissible policy, and apart among the singles
   (the single the target picks alone, the reference of every gain); equal figures go to the simpler kind
   (``SIMPLER_FIRST``);
4. deploys a route or a cascade only when it also pays over that single (a paired interval of its J/query ratio
   below 1 for an accuracy target, of its accuracy difference above 0 for an energy share; with no resamples,
   ``evaluate.bootstrap_samples: 0``, nothing shows that it pays); otherwise the single.

``m``: the selection outcomes of every candidate (``query_ids``, ``candidates``, ``correct``, ``energy_j``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jouleroute.policy.compare import compare
from jouleroute.policy.meet import meet_target
from jouleroute.policy.singles import best_column
from jouleroute.policy.target import Target

_EPS = 1e-12
ROUTE, SINGLE, CASCADE = "route", "single", "cascade"
# equal figures go to the policy with fewer moving parts: one model, then a router, then a chain (a one-model
# chain that scores exactly as that model is that model)
SIMPLER_FIRST = (SINGLE, ROUTE, CASCADE)


@dataclass(frozen=True)
class PolicyOutcomes:
    """A deployable policy of any kind on its selection queries: per query its correctness and joules (every call,
    its own cost included), the best single's beside them, and what a user would deploy (``settings``)."""

    kind: str  # route, cascade or single
    name: str
    data: str  # how it was scored: "train+val", "train+val, out of fold over 5 folds", "val", ...
    query_ids: list[str]
    correct: np.ndarray
    energy: np.ndarray
    best_correct: np.ndarray
    best_energy: np.ndarray
    settings: dict


def singles_as_policies(m) -> list[PolicyOutcomes]:
    """Every candidate of the selection matrix as a ``single`` policy (its own outcomes on every query)."""
    best = best_column(m.correct, m.energy_j)
    return [PolicyOutcomes(SINGLE, c, "train+val", list(m.query_ids), m.correct[:, k], m.energy_j[:, k],
                           m.correct[:, best], m.energy_j[:, best], {"model": c}) for k, c in enumerate(m.candidates)]


def choose_across_kinds(target: Target, kinds: Sequence[PolicyOutcomes], m, tolerance: float,
                        margin: float, samples: int, seed: int, confidence: float,
                        stability_samples: int | None = None) -> dict:
    """One rule across kinds (policy/meet.py), deciding with selection's uncertainty: for the default
    ``iso_accuracy`` target, a policy other than the best single is admissible only when the lower end of its
    paired accuracy interval against the best single (on its selection queries, out of fold where it was chosen on
    them) lies above −``margin``. A route or a cascade is deployed only when it also pays over the single model the
    target picks alone among the admissible singles; otherwise that single is deployed. ``samples``: the intervals'
    resamples; ``stability_samples`` (default ``samples``): the choice's stability's (0: not measured)."""
    figures = [_figures(p, margin, samples, confidence, seed) for p in kinds]
    guarded = target.kind == "iso_accuracy"
    admissible = [not guarded or (f["accuracy_diff_ci"][0] if f["accuracy_diff_ci"] else f["accuracy_diff_vs_best"])
                  > -margin - _EPS for f in figures]  # without resamples, the point estimate is all there is
    tiebreak = [SIMPLER_FIRST.index(p.kind) * len(kinds) + i for i, p in enumerate(kinds)]

    def pick(rows: list[int]):
        chosen = meet_target(target, [figures[i]["accuracy"] for i in rows],
                             [figures[i]["energy_share_of_best"] for i in rows],
                             [figures[i]["best_accuracy"] for i in rows], tolerance,
                             [figures[i]["accuracy_diff_ci"][0] if figures[i]["accuracy_diff_ci"] else None
                              for i in rows], what="policy", admissible=[admissible[i] for i in rows],
                             tiebreak=[tiebreak[i] for i in rows])
        return rows[chosen.index], chosen
    best, met = pick(list(range(len(kinds))))
    singles = [i for i, p in enumerate(kinds) if p.kind == SINGLE]
    alone, alone_met = pick(singles)
    alone = alone if alone_met.met else None
    others = [i for i, p in enumerate(kinds) if p.kind != SINGLE]
    challenger = pick(others)[0] if others else None  # the best route or cascade: does it pay over the single?
    evidence = None if challenger is None or alone is None else \
        _pays(target, kinds[challenger], kinds[alone], m, samples, seed, confidence) | {"name": kinds[challenger].name,
                                                                                       "kind": kinds[challenger].kind}
    deployed = best
    if kinds[best].kind != SINGLE and alone is not None:
        deployed = best if met.met and evidence["pays"] else alone
    chosen = kinds[deployed]
    single = chosen.name if chosen.kind == SINGLE else (None if alone is None else kinds[alone].name)
    return {"policy": chosen.kind, "deployed": {"kind": chosen.kind, "name": chosen.name, **chosen.settings},
            "single": single, "met_on_selection_across_kinds": met.met if deployed == best else alone_met.met,
            "reason_across_kinds": (met.reason if deployed == best else alone_met.reason),
            "single_on_selection": None if alone is None else _brief(kinds[alone], figures[alone]),
            "routing_on_selection": evidence,
            "kinds": [_brief(p, f) | {"admissible": a} for p, f, a in zip(kinds, figures, admissible)],
            "kind_stability": _stability(target, kinds, m, tolerance, admissible, tiebreak, deployed,
                                         # a route or cascade that did not pay competes in no resample
                                         list(range(len(kinds))) if deployed == best else singles,
                                         samples if stability_samples is None else stability_samples, seed)}


def _stability(target: Target, kinds: Sequence[PolicyOutcomes], m, tolerance: float, admissible: list[bool],
               tiebreak: list[int], chosen: int, competing: list[int], samples: int, seed: int) -> dict | None:
    """The share of bootstrap resamples of the selection queries whose point figures choose the deployed policy
    ``chosen`` again by the same rule: each policy's admissibility kept, equal figures to the simpler kind, among
    ``competing`` (every policy, or only the singles when the best route or cascade did not pay or missed the
    target); a policy scored on other queries (the LM router on val) keeps its figures."""
    from jouleroute.stats import resample_index

    if samples <= 0 or len(competing) < 2 or target.kind == "above_best":  # above_best reads intervals, not points
        return None
    ids = list(m.query_ids)
    same = [list(p.query_ids) == ids for p in kinds]
    full = lambda p: (p.correct.mean(), p.energy.mean(), p.best_correct.mean(), p.best_energy.mean())  # noqa: E731
    fixed = [full(p) for p in kinds]
    hits = 0
    for rows in resample_index(len(ids), samples, seed):
        points = [(kinds[i].correct[rows].mean(), kinds[i].energy[rows].mean(), kinds[i].best_correct[rows].mean(),
                   kinds[i].best_energy[rows].mean()) if same[i] else fixed[i] for i in competing]
        pick = meet_target(target, [a for a, _, _, _ in points], [j / bj for _, j, _, bj in points],
                           [b for _, _, b, _ in points], tolerance, admissible=[admissible[i] for i in competing],
                           tiebreak=[tiebreak[i] for i in competing])
        hits += competing[pick.index] == chosen
    return {"policy": hits / samples, "samples": samples}


def _figures(p: PolicyOutcomes, margin: float, samples: int, confidence: float, seed: int) -> dict:
    vs = compare(p.correct, p.energy, p.best_correct, p.best_energy, margin, samples, confidence, seed)
    return {"accuracy": vs["accuracy"], "j_per_query": vs["j_per_query"], "best_accuracy": vs["reference_accuracy"],
            "accuracy_diff_vs_best": vs["accuracy_diff"], "accuracy_diff_ci": vs["accuracy_diff_ci"],
            "energy_share_of_best": vs["energy_ratio"], "energy_share_ci": vs["energy_ratio_ci"],
            "verdict": vs["verdict"], "n_queries": vs["n_queries"]}


def _brief(p: PolicyOutcomes, f: dict) -> dict:
    return {"kind": p.kind, "name": p.name, "data": p.data, **p.settings, **{k: v for k, v in f.items()
                                                                            if k != "best_accuracy"},
            "candidate": p.name if p.kind == SINGLE else None}


def _pays(target: Target, chosen: PolicyOutcomes, single: PolicyOutcomes, m, samples: int,
          seed: int, confidence: float) -> dict:
    """The chosen route or cascade against the single model on the chosen one's selection queries, paired: the
    J/query ratio (its own cost included) and the accuracy difference, with bootstrap intervals."""
    rows = np.array([m.query_ids.index(q) for q in chosen.query_ids]) if chosen.query_ids != m.query_ids else \
        np.arange(len(m.query_ids))
    s = m.candidates.index(single.name)
    vs = compare(chosen.correct, chosen.energy, m.correct[rows, s], m.energy_j[rows, s], 0.0, samples, confidence,
                 seed)
    # without resamples nothing can show that it pays (the verdicts are "untested"): the single is deployed
    pays = vs["energy_verdict"] == "cheaper" if target.kind != "energy_share" else vs["verdict"] == "above"
    return {"single": single.name, "j_ratio": vs["energy_ratio"], "j_ratio_ci": vs["energy_ratio_ci"],
            "accuracy_diff": vs["accuracy_diff"], "accuracy_diff_ci": vs["accuracy_diff_ci"], "n_queries": len(rows),
            "pays": bool(pays), "samples": samples, "confidence": confidence}
