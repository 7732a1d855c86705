"""Rows nobody graded: how an open prompt is asked and read, how a registered task's row without gold is read,
and what the profile schema and the summary make of a null ``correct``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from jouleroute.benchmarks.grading import Grade
from jouleroute.benchmarks.registry import BBH_SUBTASKS, TASKS
from jouleroute.pool import CandidateSpec
from jouleroute.schema import FRACTIONAL_PROFILE_SCHEMA, PROFILE_SCHEMA, profile_schema
from jouleroute.tournament.open_prompts import note_generated_open_prompts, read_open_answer
from jouleroute.tournament.run import build_request
from jouleroute.tournament.summary import summarize_profile, summary_table

OPEN = pd.Series({"query_id": "user/1", "task": "user", "subtask": "", "split": "train",
                  "question": "How many legs do 3 spiders have?", "choices_json": "[]", "gold": None})


def _candidate(prompt_style: str, answer_style: str) -> CandidateSpec:
    return CandidateSpec(candidate_id=f"c-{prompt_style}-{answer_style}", model="m", prompt_style=prompt_style,
                         answer_style=answer_style, max_new_tokens=64)


@pytest.mark.parametrize("answer_style", ["direct", "cot", "loglik"])
def test_an_open_prompt_is_the_question_alone_whatever_the_answer_style(answer_style, tmp_path):
    chat = build_request(OPEN, _candidate("chat", answer_style), tmp_path)
    assert chat.messages == [{"role": "user", "content": OPEN["question"]}] and chat.max_new_tokens == 64
    fewshot = build_request(OPEN, _candidate("fewshot", answer_style), tmp_path)  # no exemplars read: no data dir
    assert fewshot.prompt == f"Question: {OPEN['question']}\nAnswer:" and fewshot.stop == ["\nQuestion:"]


def test_a_loglik_candidate_is_said_to_generate_on_an_open_task_in_one_line():
    pool = [_candidate("chat", "loglik"), _candidate("chat", "direct")]
    lines = note_generated_open_prompts(["user", "gsm8k", "user", "support"], pool)
    assert len(lines) == 2 and all("c-chat-loglik" in line and "\n" not in line for line in lines)
    assert "'support'" in lines[0] and "'user'" in lines[1]


def test_an_open_answer_is_read_by_the_task_free_extractor_and_never_graded():
    assert read_open_answer("Each has 8 legs, so \\boxed{24}.") == Grade(None, False, "24")
    nothing = read_open_answer("Spiders are arachnids.")
    assert nothing.correct is None and nothing.invalid and nothing.extracted is None


@pytest.mark.parametrize("task, output, extracted", [
    ("gsm8k", "She has 1,200 left. Answer: 1,200", "1200"),
    ("mmlu", "Answer: C", "C"),
    ("math500", "Answer: $\\frac{1}{2}$", "\\frac{1}{2}"),
    ("arc_easy", "no idea", None),
])
def test_a_registered_task_without_gold_is_read_by_its_grader_and_ungraded(task, output, extracted):
    row = {"gold": float("nan"), "subtask": "", "choices_json": "[]"}  # NaN: how pandas reads a null string
    grade = TASKS[task].grade_row(output, row)
    assert grade.correct is None and grade.extracted == extracted and grade.invalid == (extracted is None)


def test_every_bbh_subtask_without_gold_is_read_as_its_gold_would_be():
    bbh = TASKS["bbh"]
    cases = {"boolean_expressions": ("Answer: True", "True"), "navigate": ("Answer: No", "No"),
             "date_understanding": ("Answer: (C)", "(C)"), "object_counting": ("Answer: 12", "12"),
             "dyck_languages": ("Answer: ) ]", ") ]"), "word_sorting": ("Answer: apple pear", "apple pear")}
    for subtask, (output, extracted) in cases.items():
        grade = bbh.grade_row(output, {"gold": None, "subtask": subtask, "choices_json": "[]"})
        assert (grade.correct, grade.extracted) == (None, extracted), subtask
    for subtask in BBH_SUBTASKS:  # every sub-task has a gold shape
        assert bbh.grade_row("x", {"gold": None, "subtask": subtask, "choices_json": "[]"}).correct is None
    graded = bbh.grade_row(  # a row with gold keeps its verdict
        "Answer: True", {"gold": "True", "subtask": "boolean_expressions", "choices_json": "[]"})
    assert graded.correct is True


def test_null_correctness_fits_the_int8_and_the_fractional_schema():
    assert PROFILE_SCHEMA.field("correct").nullable and FRACTIONAL_PROFILE_SCHEMA.field("correct").nullable
    assert profile_schema([1, 0, None, float("nan")]) is PROFILE_SCHEMA
    assert profile_schema(pd.Series([0.5, None])) is FRACTIONAL_PROFILE_SCHEMA


def test_the_summary_scores_graded_rows_and_counts_the_others():
    rows = [("a", "gsm8k", 1.0, 2.0), ("a", "gsm8k", 0.0, 2.0), ("a", "user", None, 6.0), ("b", "user", None, 1.0)]
    profile = pd.DataFrame([{"candidate_id": c, "task": t, "correct": k, "invalid": 0, "energy_j": e,
                             "energy_net_j": e, "latency_s": 1.0, "output_tokens": 3, "energy_source": "estimated"}
                            for c, t, k, e in rows])
    summary = summarize_profile(profile)
    assert summary["a"]["accuracy"] == 0.5 and summary["a"]["ungraded"] == 1.0 and summary["a"]["graded"] == 2.0
    assert summary["a"]["j_per_correct"] == 4.0  # the graded rows' joules per correct answer
    assert pd.isna(summary["b"]["accuracy"]) and pd.isna(summary["a"]["accuracy.user"])
    assert "| b | n/a | 1 |" in summary_table(summary)
    json.dumps(summary)  # NaN is written as JSON's NaN, as inf already is
