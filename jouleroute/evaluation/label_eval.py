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

Label accuracy rewards guessing the dominant label (usually the cheapest candidate), so a
constant guess is hard to beat on it even for a good router. The objective the labels and
the GRPO reward share is the per-query utility ``correct − λ·norm_energy``
(:mod:`jouleroute.routing.utility`), so each λ also reports the mean held-out utility of

* ``router_utility``: the router's choices (a choice outside the pool scores −1 − λ);
* ``majority_utility``: always the majority label;
* ``best_constant_utility``: always the single candidate with the best mean utility on the
  TRAIN rows at that λ (``train_rows``; without them it is picked on the val rows, an
  optimistic baseline, and ``best_constant_picked_on`` says so);
* ``random_utility``: a uniformly random candidate (its expectation, not a draw);
* ``oracle_utility``: the best candidate of each query (the ceiling).

``overall["beats_trivial"]`` is true when the router's mean utility exceeds every trivial
policy's (majority, best constant, random), and ``utility_gap_closed`` is the share of the
best-constant-to-oracle gap the router closes.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from jouleroute.routing.base import Router
from jouleroute.routing.lm.spec import format_lambda
from jouleroute.routing.utility import as_table as _table, chosen_utility, query_means, routed_utilities, utilities

TRIVIAL_POLICIES = ("majority_utility", "best_constant_utility", "random_utility")


def load_rows(path: Path) -> list[dict[str, Any]]:
    with Path(path).open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _best_constant(rows: Sequence[Mapping[str, Any]], lam: float, norm: str) -> str:
    """The candidate with the highest mean utility over ``rows`` (ties: the alphabetically first id)."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        for cid, value in utilities(_table(row["correct_by_candidate"]), _table(row["energy_by_candidate"]),
                                     lam, norm).items():
            totals[cid] += value
    return max(sorted(totals), key=lambda c: totals[c])


def label_accuracy(router: Router, val_rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
                   majority_labels: Mapping[str, str] | None = None, *, energy_norm: str = "max",
                   train_rows: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Route val rows per λ and score them against their labels and in utility; see the module docstring."""
    frame = pd.DataFrame(list(val_rows)) if not isinstance(val_rows, pd.DataFrame) else val_rows.copy()
    needed = ["query_id", "question", "task", "lam", "label", "correct_by_candidate", "energy_by_candidate"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"val rows lack column(s) {missing}; use router_data's val.jsonl")
    per_lambda: dict[str, dict[str, Any]] = {}
    totals: dict[str, float] = defaultdict(float)
    scored: list[tuple[list[str], list[float]]] = []  # each val query's router utility at every λ
    for lam, group, chosen, utils in routed_utilities(router, frame, energy_norm):
        key = format_lambda(lam)
        labels = list(group["label"])
        majority = (majority_labels or {}).get(key) or Counter(labels).most_common(1)[0][0]
        correct = [_table(t) for t in group["correct_by_candidate"]]
        energy = [_table(t) for t in group["energy_by_candidate"]]
        n = len(labels)
        mine = chosen_utility(utils, chosen, lam)
        constant = _best_constant(train_rows if train_rows else group.to_dict("records"), float(lam), energy_norm)
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
            "router_utility": sum(mine) / n,
            "majority_utility": sum(u[majority] for u in utils) / n,
            "best_constant": constant,
            "best_constant_utility": sum(u[constant] for u in utils) / n,
            "random_utility": sum(sum(u.values()) / len(u) for u in utils) / n,
            "oracle_utility": sum(max(u.values()) for u in utils) / n,
        }
        per_lambda[key] = stats
        scored.append((list(group["query_id"]), mine))
        for name in ("label_accuracy", "majority_accuracy", "chosen_accuracy", "valid_share", "router_utility",
                     "oracle_utility") + TRIVIAL_POLICIES:
            totals[name] += stats[name] * n
        totals["n"] += n
    overall = {name: totals[name] / totals["n"] for name in totals if name != "n"}
    top_share = Counter(frame["label"]).most_common(1)[0][1]
    overall["global_majority_accuracy"] = top_share / len(frame)
    best_trivial = max(overall[name] for name in TRIVIAL_POLICIES)
    overall["beats_trivial"] = bool(overall["router_utility"] > best_trivial + 1e-12)
    gap = overall["oracle_utility"] - overall["best_constant_utility"]
    overall["utility_gap_closed"] = (overall["router_utility"] - overall["best_constant_utility"]) / gap if gap > 0 else 0.0
    # a query's mean utility over the λ grid: what the champion's paired-bootstrap margin resamples (selection.py)
    return {"overall": {**overall, "n": int(totals["n"])}, "by_lambda": per_lambda,
            "best_constant_picked_on": "train" if train_rows else "val",
            "per_query_utility": query_means(scored)}
