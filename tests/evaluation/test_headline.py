"""The compact headline (metrics.json: `dvc metrics show`, `dvc exp show`) carries the deployable families only."""

from __future__ import annotations

import copy

from jouleroute.evaluation.headline import LM_ALONE, headline


def test_a_diagnostic_family_stays_out_of_the_compact_headline(evaluated):
    """`lm_alone` (the LM router without the kNN evidence val chose) is in evaluate's metrics.json, not in the
    headline: with it, λ* and the iso share, the row outgrew a 120-column terminal (issue 31's flaky check)."""
    result, _, _ = evaluated
    metrics = copy.deepcopy(result.metrics)
    families = metrics["families"]
    assert families, "the synthetic evaluation sweeps families"
    metrics["families"] = families | {LM_ALONE: copy.deepcopy(next(iter(families.values())))}
    out = headline(metrics, 0.5)
    assert set(out["aiq"]) == set(families) and LM_ALONE == "lm_alone"
