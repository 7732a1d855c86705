"""Multiple-choice grading for MMLU, ARC and HellaSwag on real questions."""

from __future__ import annotations

import pytest

from jouleroute.benchmarks import get_task

# mmlu/test-abstract_algebra-0000: options 0 / 4 / 2 / 6, gold B ("4").
MMLU_ID = "mmlu/test-abstract_algebra-0000"


def _grade(query_id, output, docs_by_id):
    doc = docs_by_id[query_id]
    return get_task(doc["task"]).grade(output, doc["gold"], doc["choices"])


def test_real_mmlu_row_is_rendered_with_lettered_options(docs_by_id):
    doc = docs_by_id[MMLU_ID]
    assert doc["gold"] == "B" and doc["subtask"] == "abstract_algebra"
    assert doc["question"].endswith("\nA. 0\nB. 4\nC. 2\nD. 6")


@pytest.mark.parametrize(
    "output",
    [
        "The answer is (B)",
        "The answer is (B).",
        "B. 4",
        "(b)",
        "B",
        "Answer: B",
        "**Answer:** B",
        "Answer: (B) 4",
        "The degree is 4 because sqrt(18) = 3 sqrt(2).\nAnswer: 4",  # option text
        "Let's think step by step. [Q(sqrt2, sqrt3):Q] = 4, so the answer is B.",
    ],
)
def test_right_letters(output, docs_by_id):
    grade = _grade(MMLU_ID, output, docs_by_id)
    assert grade.correct and not grade.invalid and grade.extracted == "B"


@pytest.mark.parametrize("output", ["The answer is (C)", "C. 2", "Answer: D", "(a)"])
def test_wrong_letters(output, docs_by_id):
    grade = _grade(MMLU_ID, output, docs_by_id)
    assert not grade.correct and not grade.invalid


@pytest.mark.parametrize("output", ["", "I think this is a tricky one.", "Answer: none of these", "A plant grows."])
def test_unparsable_is_invalid(output, docs_by_id):
    grade = _grade(MMLU_ID, output, docs_by_id)
    assert (grade.correct, grade.invalid) == (False, True)


@pytest.mark.parametrize("output", ["A. 0\nB. 4\nC. 2", "Answer: <letter>", "The answer is (<letter>)."])
def test_echoed_options_or_placeholder_are_invalid(output, docs_by_id):
    # Seen from SmolLM2-135M: it repeats the option list, or copies the prompt's placeholder.
    grade = _grade(MMLU_ID, output, docs_by_id)
    assert (grade.correct, grade.invalid) == (False, True)


def test_letter_beyond_the_options_is_invalid(docs_by_id):
    grade = _grade(MMLU_ID, "Answer: E", docs_by_id)
    assert (grade.correct, grade.invalid, grade.extracted) == (False, True, "E")


def test_arc_answer_given_as_option_text(docs_by_id):
    # "Which is the most likely effect of this increase in rotation?" gold C.
    query_id = "arc_challenge/Mercury_7175875"
    assert _grade(query_id, "Planetary days will become shorter.", docs_by_id).correct
    assert not _grade(query_id, "Answer: Planetary years will become longer.", docs_by_id).correct


def test_arc_rows_with_five_options(docs_by_id):
    doc = docs_by_id["arc_easy/NYSEDREGENTS_2008_4_6"]
    assert len(doc["choices"]) != 4
    wrong = next(letter for letter in "ABCDE"[: len(doc["choices"])] if letter != doc["gold"])
    assert _grade(doc["query_id"], f"Answer: {doc['gold']}", docs_by_id).correct
    assert not _grade(doc["query_id"], f"Answer: {wrong}", docs_by_id).correct


def test_hellaswag_endings_are_options_a_to_d(docs_by_id):
    doc = docs_by_id["hellaswag/validation-0005"]  # high jump; gold B
    assert doc["gold"] == "B" and len(doc["choices"]) == 4
    assert _grade(doc["query_id"], "Answer: B", docs_by_id).correct
    assert _grade(doc["query_id"], "The boy celebrates by clapping and flexing both arms.", docs_by_id).correct
    assert not _grade(doc["query_id"], "A. starts doing spins.", docs_by_id).correct
