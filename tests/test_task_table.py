"""The embedded-default report's per-task table, and the README block it generates."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from jouleroute.stages.embedded_page import BEGIN, DOC, END
from jouleroute.evaluation.task_table import per_task_table, task_winners

REPO = Path(__file__).resolve().parents[1]


def _queries() -> pd.DataFrame:
    return pd.DataFrame([
        {"query_id": "a1", "task": "arc_easy", "subtask": "", "question": "Q?\nA. x\nB. y\nC. z\nD. w",
         "choices_json": json.dumps(["x", "y", "z", "w"])},
        {"query_id": "a2", "task": "arc_easy", "subtask": "", "question": "R?\nA. x\nB. y\nC. z\nD. w",
         "choices_json": json.dumps(["x", "y", "z", "w"])},
        {"query_id": "g1", "task": "gsm8k", "subtask": "", "question": "1+1?", "choices_json": "[]"},
        {"query_id": "b1", "task": "bbh", "subtask": "navigate", "question": "Go?", "choices_json": "[]"},
    ])


def _profile() -> pd.DataFrame:
    correct = {("a1", "small"): 1, ("a2", "small"): 0, ("a1", "big"): 0, ("a2", "big"): 1,
               ("g1", "small"): 0, ("g1", "big"): 1, ("b1", "small"): 1, ("b1", "big"): 0}
    return pd.DataFrame([{"query_id": q, "candidate_id": c, "task": {"a": "arc_easy", "g": "gsm8k", "b": "bbh"}[q[0]],
                          "correct": v} for (q, c), v in correct.items()])


def test_chance_oracle_and_accuracy_per_task():
    table = per_task_table(_profile(), _queries())
    assert table.loc["arc_easy", "chance"] == 0.25  # 4 options
    assert table.loc["bbh", "chance"] == 0.5  # navigate: Yes or No
    assert table.loc["gsm8k", "chance"] == 0.0  # free-form
    assert table.loc["arc_easy", "small"] == 0.5 and table.loc["arc_easy", "oracle"] == 1.0
    assert list(table["n"]) == [2, 1, 1]


def test_winners_share_ties_and_nobody_wins_an_all_zero_task():
    table = per_task_table(_profile(), _queries())
    winners = task_winners(table, ["small", "big"])
    assert winners == {"arc_easy": ["small", "big"], "bbh": ["small"], "gsm8k": ["big"]}
    table.loc["gsm8k", ["small", "big"]] = 0.0
    assert task_winners(table, ["small", "big"])["gsm8k"] == []


def test_readme_block_is_the_generated_one():
    """The README's table is copied from docs/embedded-default.md by the same command; never typed."""
    readme = (REPO / "README.md").read_text()
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()
    doc = (REPO / DOC).read_text().splitlines()
    assert block, "the README block is empty: run `make run` (its `embedded_page` stage fills it)"
    assert all(line in doc for line in block if line), "README block differs from docs/embedded-default.md"
