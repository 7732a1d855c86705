"""A user's scores override any label, and are a source of their own."""

from __future__ import annotations

import pandas as pd
import pytest

from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.feedback import FeedbackError, read_feedback
from jouleroute.labels.policies import apply_labels
from jouleroute.labels.sources import check_label_sources
from tests.labels.pools import profile


def test_feedback_overrides_reference_labels_and_counts_what_it_could_not_apply(tmp_path):
    pd.DataFrame({"query_id": ["gsm8k/q000", "gsm8k/q000", "gsm8k/q001", "gsm8k/q009"],
                  "candidate_id": ["small", "small", "big", "big"], "score": [1.0, 0.0, 0.0, 1.0]}
                 ).to_csv(tmp_path / "feedback.csv", index=False)
    cfg = LabelsConfig(source="reference", reference="big", feedback="feedback.csv", allow_mixed=True)
    labelled = apply_labels(profile({"big": [1, 2], "small": [3, 2]}, [1, 2]), cfg, repo_root=tmp_path)
    out = labelled.profile.set_index(["query_id", "candidate_id"])
    assert out.loc[("gsm8k/q000", "small"), ["correct", "label_source"]].tolist() == [0.5, "feedback"]  # two scores
    assert out.loc[("gsm8k/q001", "big"), ["correct", "label_source"]].tolist() == [0.0, "feedback"]
    assert out.loc[("gsm8k/q001", "small"), ["correct", "label_source"]].tolist() == [1.0, "reference:big"]
    assert labelled.summary["feedback"] == {"file": "feedback.csv", "pairs": 3, "scores": 4, "applied_rows": 2,
                                            "unmatched_pairs": 1}
    sources = check_label_sources(labelled.profile, cfg.allow_mixed)["rows_by_source"]
    assert sources == {"feedback": 2, "reference:big": 2}


@pytest.mark.parametrize("table, message", [
    ({"query_id": ["q"], "candidate_id": ["a"]}, r"fb.csv: no column 'score'"),
    ({"query_id": ["q", "q"], "candidate_id": ["a", "b"], "score": [1, 2]},
     r"fb.csv: row 1: score 2 is not a number in \[0, 1\]"),
    ({"query_id": ["q", None], "candidate_id": ["a", "b"], "score": [1, 0]}, r"fb.csv: row 1: no query_id"),
])
def test_a_bad_feedback_table_fails_in_one_line_naming_the_row(tmp_path, table, message):
    pd.DataFrame(table).to_csv(tmp_path / "fb.csv", index=False)
    with pytest.raises(FeedbackError, match=message):
        read_feedback(tmp_path / "fb.csv", "fb.csv")
