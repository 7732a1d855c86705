"""Gated promotion: a candidate policy replaces the serving one only when the newest held-out traffic says so.

Both policies meet the same newest queries (the loop's test split: the latest traffic). With the one paired
comparison of the policy layer (policy/compare.py: one set of bootstrap resamples of the queries), the candidate
is **promoted** only when

- its accuracy is **non-inferior** to the serving policy's: the interval of the accuracy difference (candidate −
  serving) lies above −``margin`` (the verdict ``above`` or ``non-inferior``), and
- it is **not dearer**: the interval of its J/query over the serving policy's does not lie above 1.

Anything else is refused, with the figures and the reason; a refusal leaves the serving version in place. A
candidate that ties on both figures (neither interval shows a gain) is promoted, as the rule says, and its reason
says it is a tie. The decision is a plain dict: the loop logs it as an MLflow run and a line of its report.
"""

from __future__ import annotations

import numpy as np

from jouleroute.policy.compare import compare

PROMOTE, REFUSE = "promote", "refuse"


def promotion_decision(candidate_correct, candidate_energy, serving_correct, serving_energy, margin: float,
                       samples: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """The gate (module doc) on per-query outcomes of the same newest queries, in the same order."""
    if len(candidate_correct) != len(serving_correct) or len(candidate_correct) == 0:
        raise ValueError("the gate needs both policies' outcomes on the same, non-empty set of queries")
    vs = compare(np.asarray(candidate_correct, float), np.asarray(candidate_energy, float),
                 np.asarray(serving_correct, float), np.asarray(serving_energy, float), margin, samples, confidence,
                 seed)
    accurate = vs["verdict"] == "above" or vs["verdict"] == "non-inferior"
    ratio = vs["energy_ratio"]
    cheap = vs["energy_verdict"] != "dearer" and (samples > 0 or (ratio is not None and ratio <= 1.0))
    reasons = []
    if not accurate:
        reasons.append(f"accuracy {vs['verdict']} at margin {margin:g} (candidate − serving "
                       f"{vs['accuracy_diff']:+.3f}, interval {_ci(vs['accuracy_diff_ci'])})")
    if not cheap:
        reasons.append(f"dearer in joules (J/query ratio {vs['energy_ratio']:.3f}, interval "
                       f"{_ci(vs['energy_ratio_ci'])})")
    gain = vs["verdict"] == "above" or vs["energy_verdict"] == "cheaper"
    return {"decision": PROMOTE if accurate and cheap else REFUSE,
            "reason": "; ".join(reasons) or "non-inferior in accuracy and not dearer in joules" + (
                "" if gain else " (a tie: neither interval shows a gain; promoted for the newer traffic it learned "
                "from)"),
            "n_queries": vs["n_queries"], "margin": margin, "samples": samples, "confidence": confidence,
            "candidate": {"accuracy": vs["accuracy"], "j_per_query": vs["j_per_query"]},
            "serving": {"accuracy": vs["reference_accuracy"], "j_per_query": vs["reference_j_per_query"]},
            "accuracy_diff": vs["accuracy_diff"], "accuracy_diff_ci": vs["accuracy_diff_ci"],
            "energy_ratio": vs["energy_ratio"], "energy_ratio_ci": vs["energy_ratio_ci"],
            "accuracy_verdict": vs["verdict"], "energy_verdict": vs["energy_verdict"]}


def _ci(ci) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"
