"""Stage `labels`' library: the profile every later stage trains on, and what its test split is scored on."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from jouleroute.best_single import best_single
from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.labelled import label_profile
from jouleroute.labels.scoring import scoring_profile
from tests.labels.pools import profile

GOLD = list(range(100, 120))
REFERENCE_WRONG = set(range(15, 20))  # the reference errs on the last five queries
JOULES = {"big": 100.0, "copier": 10.0, "contrarian": 1.0}


def _pool(split: str) -> pd.DataFrame:
    big = [g + 1 if q in REFERENCE_WRONG else g for q, g in enumerate(GOLD)]
    contrarian = [g if q in REFERENCE_WRONG else g + 2 for q, g in enumerate(GOLD)]  # right only where big is wrong
    rows = profile({"big": big, "copier": list(big), "contrarian": contrarian}, GOLD, split=split)
    rows["query_id"] = rows["query_id"] + f"-{split}"
    return rows.assign(energy_j=rows["candidate_id"].map(JOULES))


def _graded() -> pd.DataFrame:
    return pd.concat([_pool("train"), _pool("val"), _pool("test")], ignore_index=True)


def _accuracy(frame: pd.DataFrame, split: str) -> dict[str, float]:
    return frame[frame["split"] == split].groupby("candidate_id")["correct"].mean().to_dict()


def test_reference_labels_deploy_the_copier_never_the_contrarian_and_gold_shows_the_cost():
    graded = _graded()
    out = label_profile(graded, LabelsConfig(source="reference", reference="big"), Path("."))
    labelled = out.table.to_pandas()
    assert set(labelled["label_source"]) == {"reference:big"} and out.summary["coverage"] == 1.0
    # the best single on the labelled selection split, ties to the cheaper: the copier (right "everywhere")
    val = _accuracy(labelled, "val")
    names = sorted(val)
    chosen = names[best_single([val[c] for c in names], [JOULES[c] for c in names])]
    assert chosen == "copier" and val["contrarian"] == 0.0
    # test is scored on gold: the copier's real accuracy is the reference's, 0.75, not 1.0
    scored, on = scoring_profile(labelled, graded)
    assert on == "gold"
    assert _accuracy(scored, "test")["copier"] == pytest.approx(0.75)
    assert _accuracy(scored, "val")["copier"] == 1.0  # selection still reads the labels
    quality = out.quality["overall"]
    assert out.quality["measured"] and quality["by_candidate"]["copier"]["gold_accuracy"] == 0.75


def test_a_query_the_labels_cannot_mark_is_left_out_whole_and_listed():
    graded = _graded()
    silent = graded["query_id"].str.startswith("gsm8k/q003") & (graded["candidate_id"] == "big")
    graded.loc[silent, ["extracted_answer", "output_text"]] = None
    out = label_profile(graded, LabelsConfig(source="reference", reference="big"), Path("."))
    labelled = out.table.to_pandas()
    left_out = sorted(graded.loc[silent, "query_id"])
    assert out.summary["unlabelled_query_ids"] == left_out
    assert not labelled["query_id"].isin(left_out).any() and labelled["correct"].notna().all()
    assert out.summary["coverage"] == pytest.approx(1 - len(left_out) / graded["query_id"].nunique())


def test_gold_labels_pass_through_and_queries_without_gold_are_left_out():
    graded = _graded()
    ungraded = graded["query_id"].str.endswith("-train") & graded["query_id"].str.contains("q01")
    graded["correct"] = graded["correct"].astype(float).mask(ungraded)
    out = label_profile(graded, LabelsConfig(), Path("."))
    labelled = out.table.to_pandas()
    assert set(labelled["label_source"]) == {"gold"} and out.quality["measured"] is False
    assert out.summary["unlabelled_queries"] == graded.loc[ungraded, "query_id"].nunique()


def test_labels_that_mark_nothing_say_why():
    graded = _graded().assign(correct=float("nan"))
    with pytest.raises(ValueError, match="carry no gold answer: choose labels.source reference or vote"):
        label_profile(graded, LabelsConfig(), Path("."))


def test_without_gold_on_test_the_test_split_is_scored_on_the_labels():
    graded = _graded()
    graded["correct"] = graded["correct"].astype(float).mask(graded["split"] == "test")
    labelled = label_profile(graded.assign(correct=graded["correct"]),
                             LabelsConfig(source="vote"), Path(".")).table.to_pandas()
    scored, on = scoring_profile(labelled, graded)
    assert on == "labels" and scored is labelled
