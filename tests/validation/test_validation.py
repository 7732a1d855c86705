"""Stage `validate` against the real Great Expectations (ephemeral context), no mocks."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from jouleroute.validation import ValidateConfig, ValidationError, run_validate

from .conftest import CANDIDATES, write_profile

# Data docs cost ~1 s per run; the two tests that check them turn them on.
CFG = ValidateConfig(data_docs=False)
DOCS = ValidateConfig(data_docs=True)


def _run(paths, frame, cfg=CFG, schema="default", **kw):
    kwargs = {} if schema == "default" else {"schema": schema}
    write_profile(frame, paths["profile"], **kwargs)
    return run_validate(paths["profile"], paths["out"], cfg, queries_path=paths["queries"],
                        candidate_ids=CANDIDATES, **kw)


def _fails(paths, frame, **kw) -> str:
    with pytest.raises(ValidationError) as err:
        _run(paths, frame, **kw)
    # Outputs are written even when the stage fails, for inspection.
    report = json.loads((paths["out"] / "report.json").read_text())
    assert report["success"] is False and report["failures"]
    assert (paths["out"] / "report.html").read_text().count("FAILED") >= 1
    return str(err.value)


def test_valid_profile_passes_and_writes_outputs(paths, valid_tables):
    _, profile = valid_tables
    result = _run(paths, profile, cfg=DOCS, power_limit_w=100.0)
    assert result.success, result.summary()
    report = json.loads(result.report_path.read_text())
    assert report["success"] is True and report["great_expectations"]["profile"]["success"] is True
    assert "profile_vs_queries" in report["great_expectations"]
    assert result.data_docs_index is not None and result.data_docs_index.stat().st_size > 0
    html = result.html_path.read_text()
    assert "passed" in html and "http" not in html  # self-contained: nothing to fetch


def test_duplicate_pair_fails(paths, valid_tables):
    _, profile = valid_tables
    message = _fails(paths, pd.concat([profile, profile.iloc[[0]]], ignore_index=True), cfg=DOCS)
    assert (paths["out"] / "data_docs" / "index.html").is_file()  # GE's pages, failed run included
    assert "expect_compound_columns_to_be_unique" in message
    assert "query_id='gsm8k/0'" in message and "candidate_id='smol-direct'" in message


def test_negative_energy_fails(paths, valid_tables):
    _, profile = valid_tables
    bad = profile.copy()
    bad.loc[3, "energy_j"] = -1.5
    message = _fails(paths, bad)
    assert "energy_j > 0" in message and "energy_j=-1.5" in message


def test_unknown_energy_source_fails(paths, valid_tables):
    _, profile = valid_tables
    bad = profile.assign(energy_source="guessed")
    message = _fails(paths, bad)
    assert "energy_source is one of" in message and "'guessed'" in message


def test_missing_column_and_wrong_dtype_fail(paths, valid_tables):
    _, profile = valid_tables
    bad = profile.drop(columns=["latency_s"]).assign(correct=profile["correct"].astype("float64"))
    message = _fails(paths, bad, schema=None)
    assert "exactly the PROFILE_SCHEMA columns" in message and '"missing": ["latency_s"]' in message
    assert "column correct has dtype int8" in message


def test_mixed_sources_fail_unless_allowed(paths, valid_tables):
    _, profile = valid_tables
    mixed = profile.assign(energy_source=["estimated", "modelled"] * (len(profile) // 2))
    message = _fails(paths, mixed)
    assert "single energy_source" in message and "modelled" in message
    assert _run(paths, mixed, allow_mixed_sources=True).success  # params energy_policy.allow_mixed_sources


def test_missing_pair_fails(paths, valid_tables):
    _, profile = valid_tables
    message = _fails(paths, profile.drop(index=5))
    assert "rows = 4 queries x 2 candidates" in message
    missing = profile.loc[5]
    assert f"missing_query_id={missing.query_id!r}" in message
    assert f"missing_candidate_id={missing.candidate_id!r}" in message


def test_power_limit_and_task_mismatch_fail(paths, valid_tables):
    _, profile = valid_tables
    bad = profile.copy()
    bad.loc[0, "task"] = "math500"
    message = _fails(paths, bad, power_limit_w=10.0)
    assert "power limit 10 W" in message
    assert "task equals the task of its query" in message and "math500" in message


def test_raise_on_failure_false_returns_result(paths, valid_tables):
    _, profile = valid_tables
    result = _run(paths, profile.assign(invalid=1), cfg=ValidateConfig(raise_on_failure=False, data_docs=False))
    assert not result.success
    assert {f.check for f in result.failures} == {"range"}  # invalid=1 with correct=1 is impossible


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError):
        ValidateConfig(allow_mixed_source=True)
    with pytest.raises(ValueError):  # the mixing rule is energy_policy's, for every stage
        ValidateConfig(allow_mixed_sources=True)


def test_missing_profile_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        run_validate(tmp_path / "nope.parquet", tmp_path / "out", CFG)


def test_client_cpu_time_as_answer_energy_fails_naming_the_floor(paths, valid_tables):
    """Today's served-pool rows (0.008 J per answer of 20 tokens: the HTTP client's CPU time) are refused."""
    _, profile = valid_tables
    served = profile.assign(energy_j=0.008, energy_net_j=0.008, output_tokens=20)
    message = _fails(paths, served)
    assert "validate.min_j_per_output_token = 0.001" in message and "client's own CPU time" in message
    assert "(j_per_output_token): 100.00% of rows" in message and "j_per_output_token=0.0004," in message
    _run(paths, served, cfg=ValidateConfig(data_docs=False, min_j_per_output_token=0.0001))  # a lower floor passes
