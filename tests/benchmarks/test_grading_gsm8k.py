"""GSM8K numeric grading on real test questions (gold from the '####' line of the source)."""

from __future__ import annotations

import pytest

from jouleroute.benchmarks import get_task

GSM8K = get_task("gsm8k")


def test_gold_is_parsed_from_the_hash_line(docs_by_id):
    assert docs_by_id["gsm8k/test-0000"]["gold"] == "18"  # Janet's ducks
    assert docs_by_id["gsm8k/test-0002"]["gold"] == "70000"  # "#### 70000" (house flipping)


@pytest.mark.parametrize(
    "output",
    [
        "Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day.\n#### 18",
        "She has 9 eggs left to sell at $2 each. The answer is $18.",
        "Answer: 18.00",
        "Answer: **$18** per day",
        "9 eggs at $2 each gives 18 dollars",  # no marker: last number
        " 18",  # a few-shot completion after "Answer:"
    ],
)
def test_right_answers(output, docs_by_id):
    grade = GSM8K.grade(output, docs_by_id["gsm8k/test-0000"]["gold"])
    assert grade.correct and not grade.invalid


@pytest.mark.parametrize("output", ["Answer: 70,000", "The profit is $70,000.", "Answer: 70000."])
def test_thousands_separators(output, docs_by_id):
    assert GSM8K.grade(output, docs_by_id["gsm8k/test-0002"]["gold"]).correct


def test_wrong_answer_is_wrong_not_invalid(docs_by_id):
    grade = GSM8K.grade("She sells 16 - 3 = 13 eggs, 13 * 2 = 26.\nAnswer: 26", docs_by_id["gsm8k/test-0000"]["gold"])
    assert (grade.correct, grade.invalid, grade.extracted) == (False, False, "26")


def test_explicit_answer_beats_numbers_in_the_reasoning(docs_by_id):
    # The last number in the text is 2, but the marked answer is 18.
    assert GSM8K.grade("Answer: 18 (9 eggs times 2)", docs_by_id["gsm8k/test-0000"]["gold"]).correct


@pytest.mark.parametrize(
    "output", ["", "I am not sure how to solve this.", "There are 9 eggs. Answer: unknown", "Answer: <number>"]
)
def test_unparsable_output_is_invalid(output):
    grade = GSM8K.grade(output, "18")
    assert (grade.correct, grade.invalid, grade.extracted) == (False, True, None)


def test_a_list_is_not_read_as_one_number():
    # "3, 4" is two numbers, not 34.
    assert GSM8K.grade("Answer: 3, 4", "34").correct is False
