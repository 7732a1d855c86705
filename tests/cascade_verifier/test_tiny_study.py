"""The whole study end to end on a synthetic study and a tiny model: the library's SFT and GRPO train the
verifier, the figures' JSON carries no query text, and the page is written from it alone."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from experiments.cascade_verifier.page import render
from experiments.cascade_verifier.study import run_study, study_config
from tests.cascade.pool import synthetic_pool
from tests.conftest import tiny_router_base

SECRET = "zebra-quokka"  # in every question: must never reach the figures


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model gains nothing from a second thread on a busy 2-core box
    root = tmp_path_factory.mktemp("study")
    profile, queries = synthetic_pool(n=120, seed=5)
    queries = queries.assign(question=[f"{SECRET} item {i}: how many?" for i in range(len(queries))])
    (root / "artifacts").mkdir()
    profile.to_parquet(root / "artifacts/profile.parquet")
    queries.to_parquet(root / "artifacts/queries.parquet")
    models = root / "models"
    tiny_router_base(models / "tiny", [f"{SECRET} item {i}: how many? answer {i}" for i in range(40)])
    params = {"sft": {"base_model": "tiny", "max_steps": 4, "batch_size": 8, "learning_rate": 1e-2, "threads": 1},
              "grpo": {"max_steps": 2, "prompts_per_step": 2, "learning_rate": 1e-3, "threads": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    cfg = study_config(root, cheap_share=0.1, max_query_tokens=32, samples=50, lambdas=(0.0, 2.0), router_threads=1)
    try:
        return run_study(root, models, root / "work", cfg)
    finally:
        torch.set_num_threads(before)


def test_the_library_trains_the_verifier_and_the_comparison_is_complete(study):
    assert study["training"]["sft"]["steps"] == 4 and study["training"]["grpo"]["steps"] == 2
    assert study["training"]["kept"] in ("sft", "grpo")
    stages = study["stages"]
    assert (stages["final"], stages["cheap"], stages["agreement_chain"]) == \
        ("best", ["cheap_a", "cheap_b"], "cheap_a+cheap_b > best") and stages["first"] in stages["cheap"]
    test = study["test"]
    assert test["verdict"] in ("win", "tie", "loss") and len(test["accuracy_diff_verifier_minus_agreement_ci"]) == 2
    assert study["verifier_energy_source"] in ("estimated", "measured_rapl", "measured_nvml")
    assert test["verifier"]["own_j_per_query"] >= 0
    point = study["val"]["verifier"]  # chosen on val at the agreement chain's selection energy share, never above
    assert point["target_energy_share"] == study["selection"]["agreement"]["energy_share_of_final"]
    assert point["energy_share_of_final"] <= point["target_energy_share"] + 1e-9


def test_the_figures_hold_no_query_text_and_the_page_comes_from_them(study):
    text = json.dumps(study)
    assert SECRET not in text and "item 3" not in text
    page = render(json.loads(text), source="figures.json")
    assert f"{study['test']['verifier']['accuracy']:.3f}" in page and study["stages"]["agreement_chain"] in page
    assert study["test"]["verdict"].capitalize() in page
    both = render(study, source="figures.json", variant=study, variant_source="other.json")
    assert "## The same verifier with other labels" in both and "--variant other.json" in both
    assert "## The same verifier" not in page
