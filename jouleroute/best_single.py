"""The best single model, by one rule everywhere: the most accurate (ties to the cheaper, then the first listed).

Every place that names "the best single" (the deployed point's yardstick, the cascade search's final stage, the
val contest's reference, the per-task rule of the ``task_best`` baseline, the LM router's ``most_accurate_on_task``
label fallback) calls ``best_single``; a second copy fails tests/policy/test_rules_once.py. It sits in the lowest
layer so the routers can use it too; the rules built on it (the single a target picks alone, the reference single)
are the policy layer's (policy/singles.py).
"""

from __future__ import annotations

from typing import Sequence


def best_single(accuracy: Sequence[float], j_per_query: Sequence[float]) -> int:
    """The index of the most accurate entry (accuracies equal to 12 decimals tie), ties to the lower J/query, then
    to the first."""
    acc, joules = [float(a) for a in accuracy], [float(j) for j in j_per_query]
    return min(range(len(acc)), key=lambda c: (-round(acc[c], 12), joules[c], c))
