"""BBH exact-match grading: every one of the 27 sub-tasks, on its real bundled examples."""

from __future__ import annotations

import pytest

from jouleroute.benchmarks import BBH_SUBTASKS, get_task
from jouleroute.benchmarks.grading import bbh_target_kind

BBH = get_task("bbh")


def _examples(docs_by_id, subtask):
    return [d for d in docs_by_id.values() if d["task"] == "bbh" and d["subtask"] == subtask]


@pytest.mark.parametrize("subtask", BBH_SUBTASKS)
def test_every_subtask_grades_right_and_wrong_answers(subtask, docs_by_id):
    examples = _examples(docs_by_id, subtask)
    assert len(examples) == 30
    doc = examples[0]
    wrong = next(d["gold"] for d in examples if d["gold"].replace(" ", "") != doc["gold"].replace(" ", ""))
    for output in (f"Answer: {doc['gold']}", f"Let's think step by step. ... So the answer is {doc['gold']}."):
        grade = BBH.grade(output, doc["gold"], doc["choices"])
        assert grade.correct and not grade.invalid, (output, grade)
    grade = BBH.grade(f"So the answer is {wrong}.", doc["gold"], doc["choices"])
    assert not grade.correct, (wrong, grade)
    assert BBH.grade("I am not sure.", doc["gold"], doc["choices"]).correct is False


def test_target_kinds_cover_the_sub_tasks(docs_by_id):
    kinds = {d["subtask"]: bbh_target_kind(d["gold"]) for d in docs_by_id.values() if d["task"] == "bbh"}
    assert kinds["date_understanding"] == "letter"
    assert kinds["boolean_expressions"] == kinds["navigate"] == kinds["formal_fallacies"] == "label"
    assert kinds["sports_understanding"] == kinds["web_of_lies"] == "label"
    assert kinds["object_counting"] == kinds["multistep_arithmetic_two"] == "number"
    assert kinds["dyck_languages"] == "dyck" and kinds["word_sorting"] == "text"


@pytest.mark.parametrize(
    ("output", "gold", "correct"),
    [
        ("So the answer is (A).", "(A)", True),
        ("Answer: A", "(A)", True),
        ("Answer: (B)", "(A)", False),
        ("the answer is true", "True", True),
        ("Answer: False", "True", False),
        ("So the answer is invalid.", "invalid", True),
        ("So the answer is invalid.", "valid", False),  # "invalid" must not read as "valid"
        ("Answer: valid", "invalid", False),
        ("Answer: Yes", "yes", True),
        ("So the answer is -50.", "-50", True),
        ("Answer: 50", "-50", False),
        ("So the answer is ] ] >.", "] ] >", True),
        ("Answer: ]]>", "] ] >", True),
        ("Answer: ] >", "] ] >", False),
        ("Answer: > ) >", "> ) >", True),  # brackets are not a "<placeholder>"
        ("So the answer is apple, Banana, cherry.", "apple banana cherry", True),
        ("Answer: banana apple cherry", "apple banana cherry", False),
    ],
)
def test_tricky_target_formats(output, gold, correct):
    grade = BBH.grade(output, gold)
    assert grade.correct is correct and not grade.invalid


@pytest.mark.parametrize(("output", "gold"), [("", "(A)"), ("Maybe.", "True"), ("No idea", "] ]"), ("Answer:", "7")])
def test_unparsable_is_invalid(output, gold):
    grade = BBH.grade(output, gold)
    assert (grade.correct, grade.invalid) == (False, True)


def test_option_text_answers_a_lettered_target(docs_by_id):
    doc = docs_by_id["bbh/date_understanding-0000"]  # Christmas Eve 1937 -> (B) 12/25/1937
    assert doc["gold"] == "(B)" and doc["choices"][1] == "12/25/1937"
    assert BBH.grade("The date tomorrow is 12/25/1937.", doc["gold"], doc["choices"]).correct
