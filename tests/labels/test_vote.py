"""Vote labels: an answer is correct iff it agrees with the plurality answer of the pool."""

from __future__ import annotations

import pytest

from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.policies import apply_labels
from jouleroute.labels.quality import label_quality
from tests.labels.pools import profile

GOLD = list(range(200, 220))
HARD = set(range(6))  # the weak majority agrees on one wrong answer here


def _pool():
    weak = [g + 1 if q in HARD else g for q, g in enumerate(GOLD)]
    return profile({"right": list(GOLD), "weak-a": weak, "weak-b": list(weak), "weak-c": list(weak),
                    "odd": [g + 3 if q in HARD else g for q, g in enumerate(GOLD)]}, GOLD)


def test_where_the_majority_is_wrong_the_right_model_is_labelled_wrong_and_gold_agreement_counts_it():
    gold = _pool()
    labelled = apply_labels(gold, LabelsConfig(source="vote"))
    right = labelled.profile[labelled.profile["candidate_id"] == "right"].set_index("query_id")["correct"]
    hard = {f"gsm8k/q{q:03d}" for q in HARD}
    assert (right[list(hard)] == 0).all() and (right.drop(list(hard)) == 1).all()
    assert set(labelled.profile["label_source"]) == {"vote"}

    quality = label_quality(labelled.profile, gold)["overall"]
    assert quality["by_candidate"]["right"] == {"rows": 20, "labelled_accuracy": 0.7, "gold_accuracy": 1.0}
    assert quality["by_candidate"]["weak-a"] == {"rows": 20, "labelled_accuracy": 1.0, "gold_accuracy": 0.7}
    # labelled correct: 14 x 5 easy rows + 18 weak rows on the hard queries; gold-correct among them: 70
    assert quality["precision"] == pytest.approx(70 / 88)
    assert quality["recall"] == pytest.approx(70 / 76)  # the right model's 6 hard answers are missed
    assert quality["agreement"] == pytest.approx((100 - 24) / 100)  # 18 false positives + 6 false negatives


def test_a_tie_and_a_query_without_answers_get_no_label_and_are_counted():
    answers = {"a": [1, 5, None, 9], "b": [1, 6, None, 9], "c": [2, 5, None, 8], "d": [3, 6, None, 9]}
    gold = profile(answers, [1, 5, 0, 9])
    labelled = apply_labels(gold, LabelsConfig(source="vote"))
    summary = labelled.summary["by_task"]["gsm8k"]
    assert summary["unlabelled_by_reason"] == {"no_answer": 1, "tie": 1}
    assert labelled.summary["unlabelled_by_reason"] == {"no_answer": 1, "tie": 1}
    assert summary["labelled_queries"] == 2 and summary["unlabelled_rows"] == 8
    first = labelled.profile[labelled.profile["query_id"] == "gsm8k/q000"].set_index("candidate_id")["correct"]
    assert first.to_dict() == {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.0}  # 1 has two votes, 2 and 3 one each
