"""How much of a chosen chain's selection lead survives the choice: each target's rule scored out of fold.

``choose_chain`` picks one chain of thousands on the selection queries, so the chosen chain's selection figures
are flattered (the winner's curse), most for rules that stop at the first chain clearing a bar (``above_best``).
Cross-fitting measures the *rule*, not the chain: the selection queries are cut into k folds (the seeded
permutation the deployment's cross-fitting uses); for each fold the best single and the chain are chosen on the
other k−1 folds exactly as on all of them (``search``, ``choose_chain``), and the chain meets the held-out fold
once. Pooled over the folds, every selection query is scored by a chain chosen without it: the accuracy
difference with the best single chosen beside it (paired, per query) and the energy share of that single, with
paired-bootstrap intervals over the queries. It costs k searches, each on (k−1)/k of the queries.

Nothing here reads a test outcome. The report shows it beside each target's test row: a user reads whether the
rule's lead is real before trusting the chain it chose on all the selection data.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from jouleroute.cascade.chain import simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.cascade.search import choose_chain, search
from jouleroute.cascade.target import CascadeTarget
from jouleroute.stats import percentile_interval, resample_index


def best_column(m: CascadeMatrix) -> int:
    """The most accurate candidate (ties: the cheaper, then the first), as evaluation.deployed picks it."""
    acc, joules = m.correct.mean(axis=0), m.energy_j.mean(axis=0)
    return min(range(len(acc)), key=lambda c: (-round(float(acc[c]), 12), float(joules[c]), c))


def crossfit_targets(m: CascadeMatrix, targets: dict[str, CascadeTarget], folds: int, tolerance: float,
                     samples: int, confidence: float, seed: int, max_stage_size: int = 2) -> dict[str, dict]:
    """Per target name: its rule's out-of-fold figures on the selection matrix ``m`` (module doc)."""
    n = len(m.query_ids)
    if folds < 2 or n < 2 * folds:
        return {}
    fold = np.random.default_rng(seed).permutation(n) % folds
    pooled: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, str]]] = {name: [] for name in targets}
    for f in range(folds):
        inside, held = m.take(np.flatnonzero(fold != f)), m.take(np.flatnonzero(fold == f))
        best = best_column(inside)
        space = search(inside, inside.candidates[best], max_stage_size=max_stage_size)
        for name, target in targets.items():
            chain = choose_chain(space, inside, target, tolerance, samples, confidence, seed).chain
            out = simulate(chain, held)
            pooled[name].append((out.correct - held.correct[:, best], out.energy_j, held.energy_j[:, best],
                                 chain.name))
    index = resample_index(n, samples, seed) if samples > 0 else None
    return {name: _figures(parts, folds, index, confidence) for name, parts in pooled.items()}


def _figures(parts, folds: int, index: np.ndarray | None, confidence: float) -> dict:
    diff, energy, best_energy = (np.concatenate([p[i] for p in parts]) for i in range(3))
    out = {"folds": folds, "n_queries": int(diff.size), "accuracy_diff_vs_best": float(diff.mean()),
           "energy_share_of_best": float(energy.sum() / best_energy.sum()),
           "chains": dict(Counter(p[3] for p in parts).most_common())}
    if index is not None:
        out["accuracy_diff_vs_best_ci"] = percentile_interval(diff[index].mean(axis=1), confidence)
        out["energy_share_of_best_ci"] = percentile_interval(energy[index].sum(axis=1) /
                                                             best_energy[index].sum(axis=1), confidence)
    return out
