"""Agreement by each task's grader equivalence (cascade/agreement.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.cascade.agreement import agreement_bits, agreement_kind, answers_agree


@pytest.mark.parametrize("task,a,b", [
    ("math500", "1/2", "0.5"),
    ("math500", "\\frac{1}{2}", "0.5"),
    ("math500", "\\frac12", "1/2"),
    ("math_l5", "1/2", "0.5"),
    ("math500", "12221", "12221.0"),
    ("gsm8k", "12", "12.0"),
    ("gsm8k", "$1,200", "1200"),
    ("mmlu", "(B)", "B"),
    ("arc_challenge", "B.", "(B)"),
    ("winogrande", "B\n", "B"),
    ("bbh", "(C)", "(C)"),
    ("bbh", "True", "true"),
    ("bbh", "] ) >", "])>"),
    ("bbh", "apple, banana", "apple banana."),
    ("bbh", "12", "12"),
])
def test_equivalent_answers_agree(task, a, b):
    assert answers_agree(task, a, b)
    assert answers_agree(task, b, a)


@pytest.mark.parametrize("task,a,b", [
    ("math500", "1/2", "0.25"),
    ("math500", "\\sqrt{2}", "2"),
    ("gsm8k", "12", "13"),
    ("mmlu", "(B)", "C"),
    ("bbh", "True", "False"),
    ("bbh", "(A)", "(B)"),
])
def test_different_answers_do_not_agree(task, a, b):
    assert not answers_agree(task, a, b)


@pytest.mark.parametrize("task", ["math500", "math_l5", "gsm8k", "mmlu", "bbh", "winogrande"])
@pytest.mark.parametrize("empty", [None, "", "   "])
def test_an_empty_answer_never_agrees(task, empty):
    assert not answers_agree(task, empty, empty)
    assert not answers_agree(task, empty, "12")
    assert not answers_agree(task, "12", empty)


def test_a_task_without_comparable_answers_never_agrees():
    assert agreement_kind("mbpp") is None
    assert not answers_agree("mbpp", "def f(): return 1", "def f(): return 1")
    assert not answers_agree("no-such-task", "12", "12")


def test_unparsable_math_never_agrees():
    text = "The problem does not provide enough information."
    assert not answers_agree("math500", text, text)


def test_agreement_bits_group_each_querys_answers_once():
    answers = np.array([["12", "12.0", "13", None],
                        ["1/2", "0.5", "\\frac{1}{2}", "2"],
                        ["(B)", "B", "", "A"]], dtype=object)
    bits = agreement_bits(["gsm8k", "math500", "mmlu"], answers)
    assert bits.shape == (3, 4, 4)
    assert (bits == bits.transpose(0, 2, 1)).all()
    assert bits[0].tolist() == [[True, True, False, False], [True, True, False, False],
                                [False, False, True, False], [False, False, False, False]]
    assert bits[1, :3, :3].all() and not bits[1, 3, :3].any() and bits[1, 3, 3]
    assert bits[2, 0, 1] and not bits[2, 2].any() and not bits[2, 0, 3]
    # the vectorised form and the pairwise one say the same
    for q, task in enumerate(["gsm8k", "math500", "mmlu"]):
        for i in range(4):
            for j in range(4):
                if i != j:
                    assert bits[q, i, j] == answers_agree(task, answers[q, i], answers[q, j])
