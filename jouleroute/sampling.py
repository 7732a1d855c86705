"""Which train queries get a full tournament: one seeded draw per task, shared by the tournament (which
profiles them) and training (SFT fits them; GRPO and the budget curve learn on the rest). It sits below both so
that the tournament stage imports nothing from training/."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Sequence


def profiled_ids(rows: Sequence[dict], fraction: float, seed: int) -> list[str]:
    """The query ids that get a full tournament: ``fraction`` of each task's train queries (seeded).

    Drawn per task so every task keeps profiled queries for its prior; at least one per task.
    ``fraction == 1`` keeps every query in its original order (today's SFT, unchanged).
    """
    ids = [str(r["query_id"]) for r in rows]
    if fraction >= 1.0:
        return ids
    by_task: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_task[str(row["task"])].append(str(row["query_id"]))
    rng = random.Random(seed)
    chosen: set[str] = set()
    for task in sorted(by_task):
        members = sorted(by_task[task])
        chosen.update(rng.sample(members, max(1, round(fraction * len(members)))))
    return [qid for qid in ids if qid in chosen]
