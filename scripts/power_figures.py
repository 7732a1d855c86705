"""Can each pool's test split tell? (scripts/doc_figures.py's `test-power`, docs/metrics.md)

For every pipeline's deployed policy that is not the best single: how likely its test split is to show it
non-inferior, if its true accuracy difference against the best single is what selection data measured. Read from
selection figures only (the policy's out-of-fold difference and its interval on train+val, ``deployed.kinds`` of
evaluate's report.json) and the test split's size; no test outcome is read.

The paired standard deviation per query comes from the selection interval's width (normal approximation):
``sd = (high - low) / (2 z) * sqrt(n_selection)``. On ``n`` test queries the difference's standard error is
``sd / sqrt(n)``; the verdict is `non-inferior` when the interval's lower end clears ``-margin``, which happens with
probability ``Phi((d + margin) / se - z)`` for a true difference ``d``. The queries needed for 80% are
``((z + z_0.8) sd / (d + margin))^2``. A no-gold preset's selection figures are on its labels, not gold: its row
says so, and its power is only indicative.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

from figure_sources import ROOT, SourceMissing
from pool_figures import _evaluated_pipelines  # the same pipelines as the savings table

_NORMAL = NormalDist()
POWER_GOAL = 0.8


def paired_sd(low: float, high: float, n: int, confidence: float) -> float:
    """The per-query standard deviation of a paired difference whose ``confidence`` interval on ``n`` queries is
    [low, high] (normal approximation)."""
    z = _NORMAL.inv_cdf(0.5 + confidence / 2)
    return (high - low) / (2 * z) * math.sqrt(n)


def chance_noninferior(diff: float, sd: float, n: int, margin: float, confidence: float) -> float:
    """Probability that ``n`` queries show non-inferiority at ``margin`` for a true difference ``diff``."""
    if sd <= 0:
        return 1.0 if diff > -margin else 0.0
    z = _NORMAL.inv_cdf(0.5 + confidence / 2)
    return _NORMAL.cdf((diff + margin) / (sd / math.sqrt(n)) - z)


def queries_needed(diff: float, sd: float, margin: float, confidence: float, goal: float = POWER_GOAL) -> int | None:
    """Test queries for a ``goal`` chance of showing non-inferiority; None when ``diff`` is not above -margin."""
    if diff + margin <= 0:
        return None
    z = _NORMAL.inv_cdf(0.5 + confidence / 2)
    return math.ceil(((z + _NORMAL.inv_cdf(goal)) * sd / (diff + margin)) ** 2)


def split_power() -> str:
    """One row per pipeline: its deployed policy's selection difference, and what its test split can tell."""
    from jouleroute.config import load_params

    rows = ["| pool | deployed (kind) | selection: accuracy − best [CI] (queries) | test queries | chance test shows "
            "non-inferior | test queries for 80% |", "|---|---|---|---:|---:|---:|"]
    for pool, _ in _evaluated_pipelines():
        params = ROOT / ("params.yaml" if pool == "embedded" else f"studies/{pool}/params.yaml")
        report_file = load_params(params).paths.resolve("evaluate_dir", ROOT) / "report.json"
        if not report_file.exists():
            raise SourceMissing(f"{report_file.relative_to(ROOT)} is missing")
        report = json.loads(report_file.read_text())
        decision, config = report.get("deployed") or {}, report["config"]
        chosen = decision.get("deployed") or {}
        row = next((k for k in decision.get("kinds", []) if (k["kind"], k["name"]) == (chosen.get("kind"),
                                                                                       chosen.get("name"))), None)
        label = "embedded default" if pool == "embedded" else f"`{pool}`"
        if row is None or row.get("accuracy_diff_ci") is None:
            rows.append(f"| {label} | no deployed policy with selection figures | | {report['n_queries']} | | |")
            continue
        what = f"`{chosen['name']}` ({chosen['kind']})"
        diff, (low, high), n_sel = row["accuracy_diff_vs_best"], row["accuracy_diff_ci"], row["n_queries"]
        on = " on labels" if pool.startswith("nogold-") else ""
        selection = f"{diff:+.3f} [{low:+.3f}, {high:+.3f}] ({n_sel}){on}"
        if high - low <= 0:
            rows.append(f"| {label} | {what} | {selection} | {report['n_queries']} | the best single itself | |")
            continue
        margin, confidence, n_test = config["noninferiority_margin"], config["confidence"], report["n_queries"]
        sd = paired_sd(low, high, n_sel, confidence)
        chance = chance_noninferior(diff, sd, n_test, margin, confidence)
        needed = queries_needed(diff, sd, margin, confidence)
        rows.append(f"| {label} | {what} | {selection} | {n_test} | {100 * chance:.0f}% | "
                    f"{'never (at or below −margin)' if needed is None else needed} |")
    return "\n".join(rows)
