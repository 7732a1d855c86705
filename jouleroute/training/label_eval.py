"""Held-out check of a trained router: label accuracy vs the majority label, per λ.

``label_accuracy(router, val_rows)`` routes the VAL rows written by router_data
(``val.jsonl``: one row per (val query, λ)) and reports, for each λ and overall:

* ``label_accuracy``: share of queries where the router picked the policy's label;
* ``majority_accuracy``: the same for always answering the most common label of that
  λ. By default the majority is taken on the val rows themselves (the strongest
  constant guess, so the comparison is conservative); pass the train majorities from
  ``stats.json`` (``by_lambda[λ].majority_label``) for the usual baseline. Overall,
  ``global_majority_accuracy`` is the single most common label across all λ: the
  baseline for a router that ignores λ;
* ``chosen_accuracy`` / ``chosen_mean_energy_j``: whether the chosen candidate actually
  answered correctly and its energy, from the per-candidate outcomes — the
  accuracy–energy point the router reaches at that λ;
* ``valid_share``: share of choices inside the pool (1.0 for a constrained router).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from jouleroute.routing.base import Router
from jouleroute.training.prompts import format_lambda


def _table(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


def load_rows(path: Path) -> list[dict[str, Any]]:
    with Path(path).open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def label_accuracy(router: Router, val_rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
                   majority_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Route val rows per λ and score them against their labels; see the module docstring."""
    frame = pd.DataFrame(list(val_rows)) if not isinstance(val_rows, pd.DataFrame) else val_rows.copy()
    needed = ["query_id", "question", "task", "lam", "label", "correct_by_candidate", "energy_by_candidate"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"val rows lack column(s) {missing}; use router_data's val.jsonl")
    per_lambda: dict[str, dict[str, Any]] = {}
    totals: dict[str, float] = defaultdict(float)
    for lam, group in frame.groupby("lam", sort=True):
        key = format_lambda(lam)
        chosen = router.route(group.reset_index(drop=True), lam=float(lam)).candidate_ids
        labels = list(group["label"])
        majority = (majority_labels or {}).get(key) or Counter(labels).most_common(1)[0][0]
        correct = [_table(t) for t in group["correct_by_candidate"]]
        energy = [_table(t) for t in group["energy_by_candidate"]]
        n = len(labels)
        stats = {
            "n": n,
            "label_accuracy": sum(c == y for c, y in zip(chosen, labels)) / n,
            "majority_label": majority,
            "majority_accuracy": sum(y == majority for y in labels) / n,
            "chosen_accuracy": sum(float(t.get(c, 0)) for t, c in zip(correct, chosen)) / n,
            "chosen_mean_energy_j": sum(float(t[c]) for t, c in zip(energy, chosen) if c in t) / n,
            "label_mean_energy_j": sum(float(t[y]) for t, y in zip(energy, labels)) / n,
            "valid_share": sum(c in router.candidates for c in chosen) / n,
            "chosen_counts": dict(sorted(Counter(chosen).items())),
        }
        per_lambda[key] = stats
        for name in ("label_accuracy", "majority_accuracy", "chosen_accuracy", "valid_share"):
            totals[name] += stats[name] * n
        totals["n"] += n
    overall = {name: totals[name] / totals["n"] for name in totals if name != "n"}
    top_share = Counter(frame["label"]).most_common(1)[0][1]
    overall["global_majority_accuracy"] = top_share / len(frame)
    return {"overall": {**overall, "n": int(totals["n"])}, "by_lambda": per_lambda}
