"""A task the project does not know: answers compared by a task-free extractor, or not at all."""

from __future__ import annotations

import pandas as pd

from jouleroute.benchmarks.task_free import extract_answer
from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.policies import apply_labels


def _user_pool() -> pd.DataFrame:
    outputs = {"big": ["So the total is \\boxed{12}.", "The answer is (B)."],
               "small": ["12.0 apples", "I think it is C"], "tiny": ["Twelve.", "b"]}
    return pd.DataFrame([{"query_id": f"user/{q}", "candidate_id": c, "task": "user", "split": "train", "correct": 0,
                          "extracted_answer": None, "output_text": texts[q]}
                         for c, texts in outputs.items() for q in range(2)])


def test_a_users_own_task_is_labelled_with_the_task_free_extractor():
    labelled = apply_labels(_user_pool(), LabelsConfig(source="reference", reference="big"), task_free=extract_answer)
    correct = labelled.profile.set_index(["query_id", "candidate_id"])["correct"]
    assert correct[("user/0", "small")] == 1.0 and correct[("user/0", "tiny")] == 0.0  # "Twelve." reads as nothing
    assert correct[("user/1", "tiny")] == 1.0 and correct[("user/1", "small")] == 0.0  # b is (B); C is not


def test_without_an_extractor_a_users_task_gets_no_label_and_is_counted():
    labelled = apply_labels(_user_pool(), LabelsConfig(source="vote"))
    assert labelled.profile["correct"].isna().all()
    assert labelled.summary["by_task"]["user"]["unlabelled_by_reason"] == {"no_comparable_answer": 2}


def test_a_known_task_without_comparable_answers_is_never_read_by_the_extractor():
    code = _user_pool().assign(task="mbpp")
    labelled = apply_labels(code, LabelsConfig(source="vote"), task_free=extract_answer)
    assert labelled.summary["unlabelled_queries"] == 2 and labelled.profile["label_source"].isna().all()
