"""Stage `validate` on a labelled profile (stage `labels`): label_source and coverage, real Great Expectations."""

from __future__ import annotations

import pyarrow as pa
import pytest

from jouleroute.schema import PROFILE_SCHEMA
from jouleroute.validation import ValidateConfig, ValidationError, run_validate
from jouleroute.validation.config import LabelCheck

from .conftest import CANDIDATES, write_profile

CFG = ValidateConfig(data_docs=False)
LABELLED = PROFILE_SCHEMA.append(pa.field("label_source", pa.string()))


def _run(paths, frame, labels: LabelCheck):
    write_profile(frame, paths["profile"], schema=LABELLED)
    return run_validate(paths["profile"], paths["out"], CFG, queries_path=paths["queries"],
                        candidate_ids=CANDIDATES, labels=labels)


def test_one_label_source_passes(paths, valid_tables):
    _, profile = valid_tables
    assert _run(paths, profile.assign(label_source="vote"), LabelCheck(False, 1.0, 0.5)).success


def test_a_profile_mixing_gold_and_vote_labels_fails_validation_unless_allowed(paths, valid_tables):
    _, profile = valid_tables
    mixed = profile.assign(label_source=["gold", "vote"] * (len(profile) // 2))
    with pytest.raises(ValidationError, match="single label_source"):
        _run(paths, mixed, LabelCheck(False, 1.0, 0.5))
    assert _run(paths, mixed, LabelCheck(True, 1.0, 0.5)).success


def test_an_unknown_label_source_and_a_missing_one_fail(paths, valid_tables):
    _, profile = valid_tables
    with pytest.raises(ValidationError, match="label_source is gold, vote, feedback or reference"):
        _run(paths, profile.assign(label_source="guess"), LabelCheck(False, 1.0, 0.5))
    with pytest.raises(ValidationError, match="says where it came from"):
        _run(paths, profile.assign(label_source=[None] + ["vote"] * (len(profile) - 1)), LabelCheck(True, 1.0, 0.5))


def test_labels_that_cover_too_few_queries_fail(paths, valid_tables):
    _, profile = valid_tables
    with pytest.raises(ValidationError, match="labels.min_coverage = 0.5"):
        _run(paths, profile.assign(label_source="reference:gemma-cot"), LabelCheck(False, 0.4, 0.5))


def test_a_profile_without_label_source_fails_as_a_labelled_profile(paths, valid_tables):
    _, profile = valid_tables
    write_profile(profile, paths["profile"])
    with pytest.raises(ValidationError, match="label_source"):
        run_validate(paths["profile"], paths["out"], CFG, queries_path=paths["queries"], candidate_ids=CANDIDATES,
                     labels=LabelCheck(False, 1.0, 0.5))


def test_a_users_feedback_may_score_an_answer_the_extractor_could_not_read(paths, valid_tables):
    _, profile = valid_tables
    unread = profile.assign(invalid=1, correct=1.0, label_source="feedback")
    write_profile(unread, paths["profile"], schema=LABELLED.set(LABELLED.get_field_index("correct"),
                                                                pa.field("correct", pa.float64())))
    result = run_validate(paths["profile"], paths["out"], CFG, queries_path=paths["queries"],
                          candidate_ids=CANDIDATES, fractional_correct=True, labels=LabelCheck(False, 1.0, 0.5))
    assert result.success
    with pytest.raises(ValidationError, match="never counted as correct"):
        write_profile(unread.assign(label_source="vote"), paths["profile"],
                      schema=LABELLED.set(LABELLED.get_field_index("correct"), pa.field("correct", pa.float64())))
        run_validate(paths["profile"], paths["out"], CFG, queries_path=paths["queries"],
                     candidate_ids=CANDIDATES, fractional_correct=True, labels=LabelCheck(False, 1.0, 0.5))
