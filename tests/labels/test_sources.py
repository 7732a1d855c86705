"""Every correctness value carries its source; a profile never mixes sources unless the params allow it."""

from __future__ import annotations

import pandas as pd
import pytest

from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.policies import apply_labels
from jouleroute.labels.sources import LabelSourceError, check_label_sources
from tests.labels.pools import profile


def _gold_and_vote() -> pd.DataFrame:
    """A profile whose train rows are gold-graded and whose val rows are vote-labelled."""
    gold = apply_labels(profile({"a": [1, 2], "b": [1, 3], "c": [1, 2]}, [1, 2]), LabelsConfig()).profile
    vote = apply_labels(profile({"a": [5, 6], "b": [5, 7], "c": [5, 6]}, [5, 7], split="val")
                        .assign(query_id=lambda f: f["query_id"] + "-val"), LabelsConfig(source="vote")).profile
    return pd.concat([gold, vote], ignore_index=True)


def test_a_profile_mixing_gold_and_vote_labels_fails_unless_allowed():
    mixed = _gold_and_vote()
    with pytest.raises(LabelSourceError, match=r"^artifacts/profile.parquet: label_source mixes gold \(6 rows\), "
                                               r"vote \(6 rows\); set labels.allow_mixed: true") as error:
        check_label_sources(mixed, allow_mixed=False, where="artifacts/profile.parquet")
    assert "\n" not in str(error.value)
    report = check_label_sources(mixed, allow_mixed=True)
    assert report == {"rows": 12, "labelled_rows": 12, "unlabelled_rows": 0, "coverage": 1.0,
                      "rows_by_source": {"gold": 6, "vote": 6}, "mixed": True}


def test_one_source_with_unlabelled_rows_passes_and_reports_its_coverage():
    labelled = apply_labels(profile({"a": [1, 4], "b": [2, 4]}, [1, 4]), LabelsConfig(source="vote")).profile
    report = check_label_sources(labelled, allow_mixed=False)
    assert report["coverage"] == 0.5 and report["rows_by_source"] == {"vote": 2} and not report["mixed"]


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns="label_source"), r"p.parquet: no label_source column"),
    (lambda f: f.assign(label_source=["gold", "judge"]), r"p.parquet: label_source 'judge' in row \(query_id="
                                                          r"'gsm8k/q000', candidate_id='b'\) is none of gold"),
    (lambda f: f.assign(label_source=["gold", None]), r"p.parquet: row \(query_id='gsm8k/q000', candidate_id='b'\) "
                                                       r"has a correct value without a label_source"),
    (lambda f: f.assign(label_source=["reference:", "gold"]), r"label_source 'reference:' in row"),
])
def test_a_label_without_a_known_source_is_a_one_line_error_naming_the_row(change, message):
    gold = apply_labels(profile({"a": [1], "b": [2]}, [1]), LabelsConfig()).profile
    with pytest.raises(LabelSourceError, match=message):
        check_label_sources(change(gold), allow_mixed=True, where="p.parquet")
