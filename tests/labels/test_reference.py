"""Reference labels: an answer is correct iff it agrees with the reference candidate's."""

from __future__ import annotations

import pytest

from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.policies import apply_labels
from jouleroute.labels.quality import label_quality
from tests.labels.pools import profile

GOLD = list(range(100, 120))
REFERENCE_WRONG = set(range(15, 20))  # the reference errs on the last five queries
BY_BIG = LabelsConfig(source="reference", reference="big")


def _pool():
    big = [g + 1 if q in REFERENCE_WRONG else g for q, g in enumerate(GOLD)]
    copier = list(big)  # always gives the reference's answer
    contrarian = [g if q in REFERENCE_WRONG else g + 2 for q, g in enumerate(GOLD)]  # right only where big is wrong
    return profile({"big": big, "copier": copier, "contrarian": contrarian}, GOLD)


def test_reference_labels_reward_the_copier_and_punish_the_model_right_where_the_reference_is_wrong():
    gold = _pool()
    labelled = apply_labels(gold, BY_BIG)
    out = labelled.profile
    by = {c: g.set_index("query_id")["correct"] for c, g in out.groupby("candidate_id")}
    assert (by["copier"] == 1).all() and (by["big"] == 1).all()
    assert (by["contrarian"] == 0).all()  # it never agrees with the reference
    assert set(out["label_source"]) == {"reference:big"}
    assert labelled.summary["reference_correct_by_definition"].startswith("big's own answers")
    assert labelled.summary["by_task"]["gsm8k"] == {
        "queries": 20, "labelled_queries": 20, "unlabelled_queries": 0, "unlabelled_by_reason": {},
        "rows_by_source": {"reference:big": 60}, "unlabelled_rows": 0}

    # gold shows the cost: the copier is wrong where the reference is, and the contrarian's five right answers
    # are labelled wrong
    quality = label_quality(out, gold)["overall"]
    assert quality["by_candidate"]["copier"] == {"rows": 20, "labelled_accuracy": 1.0, "gold_accuracy": 0.75}
    assert quality["by_candidate"]["contrarian"] == {"rows": 20, "labelled_accuracy": 0.0, "gold_accuracy": 0.25}
    assert quality["precision"] == pytest.approx(30 / 40)  # big and copier labelled correct, right on 15 each
    assert quality["recall"] == pytest.approx(30 / 35)  # the contrarian's 5 right answers are missed
    assert quality["agreement"] == pytest.approx(45 / 60)
    low, high = quality["precision_ci"]
    assert low <= quality["precision"] <= high and 0 < high - low < 0.5


def test_a_query_where_the_reference_gave_no_answer_gets_no_label_and_is_counted():
    gold = profile({"big": [1, None, 3], "small": [1, 2, 4]}, [1, 2, 3])
    labelled = apply_labels(gold, BY_BIG)
    unlabelled = labelled.profile[labelled.profile["query_id"] == "gsm8k/q001"]
    assert unlabelled["correct"].isna().all() and unlabelled["label_source"].isna().all()
    assert labelled.summary["by_task"]["gsm8k"]["unlabelled_by_reason"] == {"reference_no_answer": 1}
    assert label_quality(labelled.profile, gold)["overall"]["unlabelled_rows"] == 2


def test_a_candidate_without_an_answer_is_wrong_where_the_query_is_labelled():
    labelled = apply_labels(profile({"big": [7], "small": [None]}, [7]), BY_BIG)
    assert labelled.profile.set_index("candidate_id")["correct"].to_dict() == {"big": 1.0, "small": 0.0}


def test_agreement_is_the_graders_equivalence_where_the_task_is_known():
    """GSM8K compares numbers ($12 and 12.0 agree); MATH compares by math-verify (1/2 and 0.5 agree)."""
    numbers = apply_labels(profile({"big": ["12"], "small": ["$12.0"]}, [12]), BY_BIG)
    assert numbers.profile["correct"].tolist() == [1.0, 1.0]
    math = apply_labels(profile({"big": ["\\frac{1}{2}"], "small": ["0.5"], "other": ["2"]}, [0], task="math_l5"),
                        BY_BIG)
    assert math.profile.set_index("candidate_id")["correct"].to_dict() == {"big": 1.0, "small": 1.0, "other": 0.0}


def test_an_unknown_reference_is_a_one_line_error_naming_the_candidates():
    message = r"labels.reference 'huge' is no candidate of the profile; candidates: big, small"
    with pytest.raises(ValueError, match=message):
        apply_labels(profile({"big": [1], "small": [1]}, [1]), LabelsConfig(source="reference", reference="huge"))
