"""One router, many trade-offs: after SFT on a λ grid the choice follows the stated λ on held-out queries.

Slow (~1-2 min): a random tiny model needs ~180 SFT steps to learn to read the λ line.
The toy pool's "hard" queries are answered only by ``large`` (20 J); the utility label
is ``large`` at λ=0 and ``small`` (1 J) at λ=2, so the chosen energy must fall with λ.
"""

from __future__ import annotations

import pytest
from conftest import RIGHT, TOPICS, toy_tables

from jouleroute.routing.lm_router import LMRouter
from jouleroute.training.config import RouterDataConfig, SftConfig
from jouleroute.training.label_eval import label_accuracy, load_rows
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import run_sft
from jouleroute.training.tiny_model import build_tiny_model


@pytest.mark.slow
def test_chosen_energy_falls_as_lambda_rises_on_held_out_queries(tmp_path):
    profile, queries = toy_tables({"train": 24, "val": 4, "test": 1})
    queries = queries[queries.question.str.contains("hard")]
    profile = profile[profile.query_id.isin(queries.query_id)]
    run_router_data(profile, queries, RouterDataConfig(lambdas=(0.0, 2.0), lambdas_per_query=None), tmp_path / "data")
    cfg = SftConfig(epochs=30, batch_size=8, learning_rate=3e-3, save_steps=10_000, logging_steps=50, log_model=False,
                    train_last_layers=None)
    corpus = [f"A {level} question about {t}. Energy weight: 0 0.25 small mid large" for level in RIGHT for t in TOPICS]
    base = build_tiny_model(tmp_path / "base", corpus=corpus, hidden_size=64)  # 32 wide did not learn it
    run_sft(cfg, tmp_path / "data", base, tmp_path / "sft")
    result = label_accuracy(LMRouter(tmp_path / "sft" / "model"), load_rows(tmp_path / "data" / "val.jsonl"))
    by_lam = result["by_lambda"]
    assert by_lam["2"]["chosen_mean_energy_j"] < by_lam["0"]["chosen_mean_energy_j"]
    # a λ-blind constant guess gets half right; the router must beat it
    assert result["overall"]["label_accuracy"] > result["overall"]["global_majority_accuracy"]
