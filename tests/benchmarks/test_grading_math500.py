"""MATH-500 grading: symbolic equivalence through math-verify, on real problems."""

from __future__ import annotations

import threading

import pytest

from jouleroute.benchmarks import get_task

MATH = get_task("math500")


@pytest.mark.parametrize(
    ("query_id", "output"),
    [
        ("math500/test-precalculus-807", "So the point is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$."),
        ("math500/test-precalculus-807", "Answer: (3, \\frac{\\pi}{2})"),
        ("math500/test-algebra-2584", "The answer is $\\frac{14}{3}$."),
        ("math500/test-algebra-2584", "Final Answer: The final answer is $\\dfrac{14}{3}$. I hope it is correct."),
        ("math500/test-algebra-2584", "Answer: 14/3"),
        ("math500/test-algebra-2036", "so the distance is $\\sqrt{117} = \\boxed{3\\sqrt{13}}$"),
        ("math500/test-prealgebra-1302", " 11\\sqrt{2}"),  # a few-shot completion, no delimiters
        ("math500/test-algebra-1072", "Answer: $\\frac{243}{625}$"),
    ],
)
def test_equivalent_answers_are_right(query_id, output, docs_by_id):
    grade = MATH.grade(output, docs_by_id[query_id]["gold"])
    assert grade.correct and not grade.invalid


def test_dollar_amounts_with_escaped_dollar_sign():
    assert MATH.grade("The total is \\boxed{\\$36}.", "\\$36").correct
    assert MATH.grade("Answer: \\$36", "\\$36").correct


@pytest.mark.parametrize(
    ("query_id", "output"),
    [
        ("math500/test-algebra-2584", "The answer is $\\frac{3}{14}$."),
        ("math500/test-algebra-2036", "\\boxed{13\\sqrt{3}}"),
        ("math500/test-precalculus-807", "Answer: (3, \\pi)"),
    ],
)
def test_wrong_answers_are_wrong(query_id, output, docs_by_id):
    grade = MATH.grade(output, docs_by_id[query_id]["gold"])
    assert not grade.correct and not grade.invalid


@pytest.mark.parametrize("output", ["", "I could not work this one out.", "Answer:", "The answer is $<answer>$"])
def test_unparsable_output_is_invalid(output):
    grade = MATH.grade(output, "\\frac{14}{3}")
    assert (grade.correct, grade.invalid) == (False, True)


def test_grading_works_off_the_main_thread():
    # math-verify's signal-based timeout only works in the main thread; Prefect runs tasks in
    # worker threads, where grading must still work.
    result = {}
    worker = threading.Thread(target=lambda: result.update(g=MATH.grade("\\boxed{\\frac{14}{3}}", "\\frac{14}{3}")))
    worker.start()
    worker.join()
    assert result["g"].correct
