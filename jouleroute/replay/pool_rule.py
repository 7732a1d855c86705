"""Which models of a public pool become candidates: a rule written down and applied to train only.

``pareto``: the train accuracy-energy front (no other model is at least as accurate for no more joules per
query, one of the two strictly). More models on the front than ``max_candidates``: the cheapest and the most
accurate are kept and the rest are taken evenly along the front by rank. ``all``: every mapped model.
Nothing looks at val or test, and nothing depends on a task's or a model's name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jouleroute.replay.config import PoolRule


def train_points(profile: pd.DataFrame) -> pd.DataFrame:
    """Per candidate on train: mean (expected) correctness and mean energy per query, cheapest first."""
    train = profile[profile["split"] == "train"]
    points = train.groupby("candidate_id").agg(accuracy=("correct", "mean"), energy_j=("energy_j", "mean"))
    return points.sort_values(["energy_j", "accuracy"], ascending=[True, False])


def pareto_front(points: pd.DataFrame) -> list[str]:
    """Candidates no other dominates, cheapest first."""
    front, best = [], -np.inf
    for candidate, row in points.iterrows():  # cheapest first: on the front iff more accurate than all cheaper
        if row["accuracy"] > best:
            front.append(candidate)
            best = row["accuracy"]
    return front


def choose_candidates(profile: pd.DataFrame, rule: PoolRule) -> tuple[list[str], pd.DataFrame]:
    points = train_points(profile)
    if rule.kind == "all":
        chosen = list(points.index)
    else:
        chosen = pareto_front(points)
    if len(chosen) > rule.max_candidates:
        keep = sorted(set(np.linspace(0, len(chosen) - 1, rule.max_candidates).round().astype(int)))
        chosen = [chosen[i] for i in keep]
    table = points.assign(on_front=points.index.isin(pareto_front(points)), chosen=points.index.isin(chosen))
    return chosen, table
