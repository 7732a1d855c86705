"""Per-task accuracy of every candidate against chance, the oracle and published figures.

Pure functions over a profile and its query table; the `embedded_page` stage (``jouleroute embedded_page``)
renders them.
Chance is what uniform guessing scores: 1/k on a k-way multiple-choice row, 0 on a free-form one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from jouleroute.benchmarks import get_task
from jouleroute.benchmarks.registry import TASKS
from jouleroute.benchmarks.cloze import choice_frame


def chance_level(row: pd.Series) -> float:
    if row["task"] not in TASKS:  # a user's own prompt (an open prompt): no options, no chance level
        return 0.0
    task = get_task(row["task"])
    frame = choice_frame(task.name, row["subtask"], task.hint(row["subtask"]), row["question"],
                         json.loads(row["choices_json"]))
    return 0.0 if frame is None else 1.0 / len(frame[1])


def per_task_table(profile: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    """One row per task: n, chance, each candidate's accuracy, the oracle (any candidate correct)."""
    chance = queries.assign(chance=queries.apply(chance_level, axis=1)).groupby("task")["chance"].mean()
    wide = profile.pivot_table(index=["task", "query_id"], columns="candidate_id", values="correct")
    table = wide.groupby("task").mean()
    table.insert(0, "n", wide.groupby("task").size())
    table.insert(1, "chance", chance.reindex(table.index).fillna(0.0))
    table["oracle"] = wide.max(axis=1).groupby("task").mean()
    return table


def task_winners(table: pd.DataFrame, candidates: list[str]) -> dict[str, list[str]]:
    """Per task, the candidates with the top accuracy (ties share the win); empty if all score 0."""
    winners = {}
    for task, row in table.iterrows():
        best = max(row[c] for c in candidates)
        winners[task] = [c for c in candidates if row[c] == best] if best > 0 else []
    return winners


def load_model_cards(path: Path) -> dict[str, list[dict]]:
    """``{model: [{task, value, setting, kind, source}]}`` (data/model_cards.yaml); {} when absent."""
    if not path.is_file():
        return {}
    raw = yaml.safe_load(path.read_text()) or {}
    for model, entries in raw.items():
        for i, entry in enumerate(entries):
            missing = {"task", "value", "setting", "kind", "source"} - set(entry)
            if missing:
                raise ValueError(f"{path}: {model}[{i}]: missing field(s) {sorted(missing)}")
    return raw
