"""Fractional correctness: an imported `correct` of 0.3 is an expected correctness of 0.3 in every reader.

One hand-made table, imported with the real importer, then read by each place that computes an accuracy
or a label from `correct`: the evaluation, the profile summary, the per-task table, router_data's priors and
labels, the baselines' training table, the oracle, and the Great Expectations suite of an imported profile.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from jouleroute.evaluation.metrics import summarize
from jouleroute.evaluation.outcomes import build_matrix, oracle_outcome, single_outcomes
from jouleroute.evaluation.task_table import per_task_table
from jouleroute.replay import EnergyMapping, EnergyModelConfig, ImportConfig, OutcomeTableError, run_import
from jouleroute.replay.tables import pool_summary
from jouleroute.routing.baselines.simple import OracleRouter
from jouleroute.routing.baselines.train_table import build_train_table
from jouleroute.routing.utility import cheapest_correct_label
from jouleroute.schema import FRACTIONAL_PROFILE_SCHEMA, PROFILE_SCHEMA
from jouleroute.training.config import RouterDataConfig
from jouleroute.training.router_data import run_router_data
from jouleroute.validation import ValidateConfig, ValidationError, run_validate

SPLIT = {f"q{i}": s for i, s in enumerate(["train", "train", "val", "test", "test", "train"])}


def _rows(correct_small: float = 0.3) -> list[dict]:
    """Six queries x two candidates: `small` is right with expectation 0.3 on every query, `big` always."""
    rows = []
    for q, split in SPLIT.items():
        for cand, correct, out in (("small", correct_small, 2), ("big", 1, 8)):
            rows.append({"query_id": q, "task": "gsm8k", "prompt": f"question {q}", "candidate": cand, "split": split,
                         "correct": correct, "input_tokens": 10, "output_tokens": out})
    return rows


def _import(fake_ref, tmp_path: Path, repo_root: Path, rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    path = tmp_path / "outcomes.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    energy = EnergyModelConfig(reference_dir=str(fake_ref.root), gpu=fake_ref.gpu, target_batch_size=64,
                               prefill_share=0.5)
    models = {c: EnergyMapping(reference=fake_ref.model, reason="test stand-in") for c in ("small", "big")}
    out = tmp_path / "out"
    run_import(ImportConfig(input_file=str(path), energy=energy, models=models), repo_root,
               out / "queries.parquet", out / "profile.parquet")
    return pd.read_parquet(out / "profile.parquet"), pd.read_parquet(out / "queries.parquet")


def test_a_fraction_is_an_expectation_everywhere_accuracy_is_computed(fake_ref, tmp_path, repo_root):
    profile, queries = _import(fake_ref, tmp_path, repo_root, _rows())
    assert pq.read_schema(tmp_path / "out" / "profile.parquet").remove_metadata() == FRACTIONAL_PROFILE_SCHEMA
    small = profile[profile["candidate_id"] == "small"]
    assert small["correct"].tolist() == pytest.approx([0.3] * 6)

    m = build_matrix(profile, queries, "test", "energy_j")  # evaluate
    singles = {o.name: o for o in single_outcomes(m)}
    block = summarize(singles["small"].correct, singles["small"].energy_j, singles["small"].latency_s,
                      singles["small"].choice, m.candidates)
    assert block["accuracy"] == pytest.approx(0.3)
    assert oracle_outcome(m).choice.tolist() == [m.candidates.index("big")] * 2  # the cheapest of the most likely

    summary = {(r["candidate_id"], r["split"]): r["accuracy"] for r in pool_summary(profile)}  # import summary
    assert summary[("small", "test")] == pytest.approx(0.3)
    table = per_task_table(profile[profile["candidate_id"] == "small"], queries.assign(choices_json="[]"))
    assert table.loc["gsm8k", "small"] == pytest.approx(0.3)

    stats = run_router_data(profile, queries, RouterDataConfig(), tmp_path / "rd")  # labels and priors
    spec = json.loads((tmp_path / "rd" / "router_spec.json").read_text())
    assert spec["task_accuracy"]["gsm8k"]["small"] == pytest.approx(0.3)
    train = [json.loads(line) for line in (tmp_path / "rd" / "train.jsonl").read_text().splitlines()]
    assert all(r["correct_by_candidate"] == {"small": pytest.approx(0.3), "big": 1} for r in train)
    assert stats  # the stage ran to its stats

    table = build_train_table(profile, queries, ["big", "small"], "energy_j", "train")  # baselines
    assert np.nanmean(table.correct[:, 1]) == pytest.approx(0.3)
    assert OracleRouter(profile, ["big", "small"]).choice["q3"] == "big"
    assert cheapest_correct_label({"a": 0.3, "b": 0.6}, {"a": 1.0, "b": 2.0}, ["a", "b"], "cheapest") == "b"


def test_zero_one_tables_keep_the_int8_schema(fake_ref, tmp_path, repo_root):
    profile, _ = _import(fake_ref, tmp_path, repo_root, _rows(correct_small="yes"))
    assert pq.read_schema(tmp_path / "out" / "profile.parquet").remove_metadata() == PROFILE_SCHEMA
    assert set(profile["correct"]) == {1}


@pytest.mark.parametrize("value", ["1.5", "-0.1", "half", "nan"])
def test_values_outside_the_unit_interval_are_refused_naming_file_row_and_field(fake_ref, tmp_path, repo_root, value):
    rows = _rows()
    rows[3]["correct"] = value
    with pytest.raises(OutcomeTableError, match=r"outcomes\.csv row 3 \(line 5\) field 'correct': expected a number "
                                                r"in \[0, 1\]") as err:
        _import(fake_ref, tmp_path, repo_root, rows)
    assert "\n" not in str(err.value)


def test_validation_accepts_fractions_for_an_imported_profile_only(fake_ref, tmp_path, repo_root):
    profile, _ = _import(fake_ref, tmp_path, repo_root, _rows())
    paths = {"profile": tmp_path / "out" / "profile.parquet", "queries": tmp_path / "out" / "queries.parquet"}
    cfg = ValidateConfig(data_docs=False)
    result = run_validate(paths["profile"], tmp_path / "v1", cfg, queries_path=paths["queries"],
                          fractional_correct=True)
    assert result.success, result.summary()
    with pytest.raises(ValidationError, match="correct has dtype int8"):  # a tournament's profile stays 0/1
        run_validate(paths["profile"], tmp_path / "v2", cfg, queries_path=paths["queries"])
    invalid = profile.assign(invalid=(profile["candidate_id"] == "small").astype("int8"))  # invalid yet 0.3 right
    invalid.to_parquet(paths["profile"], schema=pq.read_schema(paths["profile"]).remove_metadata(), index=False)
    with pytest.raises(ValidationError, match="an invalid answer \\(invalid=1\\) is never counted as correct"):
        run_validate(paths["profile"], tmp_path / "v3", cfg, queries_path=paths["queries"], fractional_correct=True)
