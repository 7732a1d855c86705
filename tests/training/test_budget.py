"""The budget curve (stage `budget`, issue 19) on a tiny model: its points, their joules and the reports' section.

The toy profile's joules differ per pair, so a bill summed over the wrong pairs cannot match.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import toy_tables
from pydantic import ValidationError

from jouleroute.routing.lm.config import RouterConfig
from jouleroute.training.budget import BudgetInputs, budget_section, outcome_rows, run_budget
from jouleroute.training.config import BudgetConfig, GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.partial_feedback import profiled_ids
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import read_jsonl, run_sft

LAMBDAS = (0.0, 2.0)


@pytest.fixture(scope="module")
def curve(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("budget")
    profile, queries = toy_tables({"train": 4, "val": 1, "test": 1})
    profile["energy_j"] = profile["energy_j"] * (1 + 0.01 * (profile.index % 17))
    run_router_data(profile, queries, RouterDataConfig(lambdas=LAMBDAS, label_policy="utility"), root / "data")
    sft_cfg = SftConfig(max_steps=2, batch_size=4, learning_rate=1e-2, save_steps=50)
    run_sft(sft_cfg, root / "data", tiny_model_dir, root / "sft")  # the pipeline's own SFT: every train query
    grpo_cfg = GrpoConfig(max_steps=3, prompts_per_step=2, logging_steps=1, save_steps=50, learning_rate=1e-3)
    cfg = BudgetConfig(fractions=[0.5, 1.0], grpo_fractions=[0.5], num_generations=2, bootstrap_samples=200)
    inputs = BudgetInputs(data_dir=root / "data", base_model_dir=str(tiny_model_dir), sft_dir=root / "sft",
                          test=outcome_rows(profile, queries, "energy_j", LAMBDAS, ["small", "mid", "large"]),
                          out_dir=root / "budget", cache_dir=root / "cache")
    result = run_budget(cfg, sft_cfg, grpo_cfg, RouterConfig(threads=1), inputs)
    return root, profile, result


def test_every_point_bills_the_energies_of_its_pairs(curve):
    root, profile, result = curve
    assert json.loads((root / "budget" / "budget.json").read_text()) == result
    assert (root / "budget" / "budget.png").stat().st_size > 5_000
    points = {p["name"]: p for p in result["points"]}
    assert list(points) == ["sft@1", "sft@0.5", "sft+grpo@0.5"]  # the reference first
    train = profile[profile["split"] == "train"]
    energy = train.set_index(["query_id", "candidate_id"])["energy_j"]
    assert points["sft@1"]["profiling_j"] == pytest.approx(train["energy_j"].sum())
    assert points["sft@1"]["reused_pipeline_sft"] is True
    assert result["full_train_tournament"]["joules"] == pytest.approx(train["energy_j"].sum())
    half = set(profiled_ids(read_jsonl(root / "data" / "train.jsonl"), 0.5, 0))
    assert points["sft@0.5"]["profiling_j"] == pytest.approx(train.loc[train["query_id"].isin(half), "energy_j"].sum())
    assert points["sft@0.5"]["n_profiled"] == len(half) < train["query_id"].nunique()
    revealed = json.loads((root / "budget" / "routers" / "grpo-0.5-k2" / "revealed_pairs.json").read_text())
    assert revealed and all(q not in half for q, _c, _n in revealed)  # GRPO read only the unprofiled rest
    grpo = points["sft+grpo@0.5"]
    assert grpo["profiling_j"] == pytest.approx(points["sft@0.5"]["profiling_j"]
                                                + sum(energy[(q, c)] for q, c, _n in revealed))
    assert grpo["revealed_pairs"] == len(revealed) and grpo["by_source"] == {"estimated": grpo["profiling_j"]}
    assert grpo["share_of_full_train_tournament"] == pytest.approx(grpo["profiling_j"] / train["energy_j"].sum())


def test_utilities_on_val_and_test_with_a_paired_ci_against_full_sft(curve):
    _root, profile, result = curve
    assert result["queries"] == {"val": profile.loc[profile["split"] == "val", "query_id"].nunique(),
                                 "test": profile.loc[profile["split"] == "test", "query_id"].nunique()}
    for point in result["points"]:
        for split in ("val", "test"):
            assert -2.0 <= point[f"{split}_utility"] <= 1.0, point
            low, high = point[f"{split}_minus_full_sft_ci95"]
            assert low <= point[f"{split}_minus_full_sft"] <= high
    reference = result["points"][0]
    assert reference["val_minus_full_sft_ci95"] == [0.0, 0.0] and reference["test_minus_full_sft"] == 0.0


def test_the_reports_section_is_the_table_and_the_plot(curve, tmp_path):
    root, _profile, result = curve
    doc = tmp_path / "docs" / "study.md"
    lines = budget_section(root / "budget", doc)
    assert lines[1] == "## Budget curve" and lines[-1] == "![Budget curve](study-budget.png)"
    assert (tmp_path / "docs" / "study-budget.png").read_bytes() == (root / "budget" / "budget.png").read_bytes()
    rows = [line for line in lines if line.startswith("| sft")]
    assert len(rows) == len(result["points"])
    assert "`estimated`" in "\n".join(lines)
    assert budget_section(tmp_path / "absent", doc) == []  # a stage that has not run: no section


def test_test_rows_skip_queries_without_every_outcome():
    profile, queries = toy_tables({"train": 1, "val": 1, "test": 2})
    dropped = profile[(profile["split"] == "test")]["query_id"].iloc[0]
    partial = profile[~((profile["query_id"] == dropped) & (profile["candidate_id"] == "large"))]
    rows = outcome_rows(partial, queries, "energy_j", LAMBDAS, ["small", "mid", "large"])
    assert dropped not in set(rows["query_id"])
    assert len(rows) == (profile.loc[profile["split"] == "test", "query_id"].nunique() - 1) * len(LAMBDAS)
    assert isinstance(rows, pd.DataFrame) and set(rows["lam"]) == set(LAMBDAS)


def test_budget_params_are_typed():
    assert BudgetConfig().points == [0.5, 1.0]
    assert BudgetConfig(fractions=[0.25], grpo_fractions=[0.5]).points == [0.25, 0.5, 1.0]
    with pytest.raises(ValidationError, match="below 1"):
        BudgetConfig(grpo_fractions=[1.0])
    with pytest.raises(ValidationError, match=r"\(0, 1\]"):
        BudgetConfig(fractions=[0.0, 1.0])
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        BudgetConfig(fraction=[0.5])
