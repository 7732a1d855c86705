"""GRPO with partial feedback (grpo.reward_source: replay) on a tiny local model, and the profiling bill.

SFT fits half of the toy train queries (a full tournament of them); GRPO rolls out k=2 of the 3
candidates on the others and may read only those pairs' outcomes.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import RIGHT, TOPICS, toy_tables
from pydantic import ValidationError
from transformers import AutoModelForCausalLM

from jouleroute.routing.lm.router import LMRouter
from jouleroute.tournament.config import TournamentConfig
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.partial_feedback import (
    PROFILED_FILE, Outcome, RevealedOutcomes, profiled_ids, profiling_joules, write_profiled,
)
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import read_jsonl, run_sft
from tests.conftest import tiny_router_base
from tests.training.test_sft_grpo import KillAt

LAMBDAS = (0.0, 2.0)
POISON_J = 1e9


def replay_cfg(**changes) -> GrpoConfig:
    base = dict(reward_source="replay", num_generations=2, max_steps=4, prompts_per_step=2, logging_steps=1,
                save_steps=50, learning_rate=1e-3)
    return GrpoConfig(**{**base, **changes})


def weights(model_dir) -> dict[str, torch.Tensor]:
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).state_dict()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The toy profile with joules that differ per query, so a sum over the wrong pairs cannot match."""
    out = tmp_path_factory.mktemp("router_data")
    profile, queries = toy_tables({"train": 4, "val": 1, "test": 1})
    profile["energy_j"] = profile["energy_j"] * (1 + 0.01 * (profile.index % 17))
    run_router_data(profile, queries, RouterDataConfig(lambdas=LAMBDAS, label_policy="utility"), out)
    return out


@pytest.fixture(scope="module")
def sft_half(data_dir, tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    cfg = SftConfig(max_steps=2, batch_size=4, learning_rate=1e-2, save_steps=50)
    return out, run_sft(cfg, data_dir, tiny_model_dir, out, share=0.5)


@pytest.fixture(scope="module")
def replay_run(data_dir, sft_half, tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo")
    return out, run_grpo(replay_cfg(), data_dir, sft_half[0], out)


def test_sft_fits_only_the_profiled_share(sft_half, data_dir):
    out, metrics = sft_half
    saved = json.loads((out / PROFILED_FILE).read_text())["query_ids"]
    rows = read_jsonl(data_dir / "train.jsonl")
    assert metrics["n_queries"] == len(saved) == len(rows) // 2
    tasks = {r["query_id"]: r["task"] for r in rows}
    assert {tasks[q] for q in saved} == set(tasks.values())  # drawn per task: every task keeps profiled queries
    assert profiled_ids(rows, 1.0, 0) == [r["query_id"] for r in rows]  # the default fits every query, in order


def test_replay_never_reads_an_unrevealed_outcome(replay_run, data_dir, sft_half, tmp_path):
    """Poison every pair GRPO did not reveal (outcome flipped, joules absurd): the same seed gives the same weights."""
    out, metrics = replay_run
    revealed = {(q, c) for q, c, _n in json.loads((out / "revealed_pairs.json").read_text())}
    profiled = set(json.loads((sft_half[0] / PROFILED_FILE).read_text())["query_ids"])
    poisoned_dir = tmp_path / "poisoned"
    shutil.copytree(data_dir, poisoned_dir)
    rows, flipped = read_jsonl(data_dir / "train.jsonl"), 0
    for row in rows:
        if row["query_id"] in profiled:
            continue  # a full tournament ran on these: SFT and the reward's priors read them legitimately
        for cid in row["correct_by_candidate"]:
            if (row["query_id"], cid) not in revealed:
                row["correct_by_candidate"][cid] = 1 - row["correct_by_candidate"][cid]
                row["expected_correct_by_candidate"][cid] = -5.0
                row["energy_by_candidate"][cid] = POISON_J
                flipped += 1
    assert 0 < flipped and len(revealed) > 0  # k=2 of 3 candidates: some pairs stay unrevealed
    (poisoned_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    again = run_grpo(replay_cfg(), poisoned_dir, sft_half[0], tmp_path / "grpo")
    first, second = weights(out / "model"), weights(tmp_path / "grpo" / "model")
    assert not all(torch.equal(first[k], weights(sft_half[0] / "model")[k]) for k in first)  # GRPO did train
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert again["profiling"] == metrics["profiling"]


def test_profiling_joules_are_the_revealed_and_profiled_pairs(replay_run, data_dir, sft_half):
    out, metrics = replay_run
    rows = {r["query_id"]: r for r in read_jsonl(data_dir / "train.jsonl")}
    reads = json.loads((out / "revealed_pairs.json").read_text())
    profiled = json.loads((sft_half[0] / PROFILED_FILE).read_text())["query_ids"]
    assert not {q for q, _c, _n in reads} & set(profiled)  # GRPO rolls out on the queries SFT did not profile
    bill = metrics["profiling"]
    revealed_j = sum(rows[q]["energy_by_candidate"][c] for q, c, _n in reads)
    assert bill["grpo_revealed"]["joules"] == pytest.approx(revealed_j)
    assert bill["tournament"]["joules"] == pytest.approx(
        sum(e for q in profiled for e in rows[q]["energy_by_candidate"].values()))
    assert bill["total_joules"] == pytest.approx(bill["tournament"]["joules"] + bill["grpo_revealed"]["joules"])
    assert bill["by_source"] == {"estimated": bill["total_joules"]} and bill["energy_column"] == "energy_j"
    # every completion names a candidate or is invalid; each valid one is one read
    assert bill["grpo_revealed"]["rollouts"] == sum(n for _q, _c, n in reads) <= 4 * 2 * 2
    assert metrics["n_prompts"] == len(rows) - len(profiled)  # one prompt per query at a seeded λ


def test_profile_source_bills_the_full_tournament(data_dir, sft_half, tmp_path):
    metrics = run_grpo(GrpoConfig(max_steps=1, prompts_per_step=1, save_steps=50), data_dir, sft_half[0], tmp_path)
    rows = read_jsonl(data_dir / "train.jsonl")
    bill = metrics["profiling"]
    assert bill["reward_source"] == "profile" and bill["grpo_revealed"]["pairs"] == 0
    assert bill["tournament"]["pairs"] == 3 * len(rows)
    assert bill["total_joules"] == pytest.approx(sum(e for r in rows for e in r["energy_by_candidate"].values()))


def expected_reward(model_dir, rows: list[dict], prompts: list[list], temperature: float) -> float:
    """Mean over GRPO's prompts (query, λ) of E_{c ~ π_λ}[correct(c) − λ·ê(c)], π_λ the sampling policy,
    with the full outcomes: exact, no sampling (an evaluation; training saw only the pairs it revealed)."""
    by_id = {r["query_id"]: r for r in rows}
    scored = LMRouter(model_dir).score(pd.DataFrame([by_id[q] for q, _lam in prompts]))
    total = 0.0
    for i, (qid, lam) in enumerate(prompts):
        logits = scored.values(lam)[i] / temperature
        policy = np.exp(logits - logits.max())
        row = by_id[qid]
        top = max(row["energy_by_candidate"].values())
        reward = [row["correct_by_candidate"][c] - lam * row["energy_by_candidate"][c] / top for c in scored.candidates]
        total += float(np.dot(policy / policy.sum(), reward))
    return total / len(prompts)


def test_partial_feedback_raises_the_mean_reward(data_dir, tmp_path):
    """GRPO with partial feedback from an untrained router (seeded): the exact expected reward of the prompts
    it rolled out goes up, while some pairs stay unrevealed. Label logits start on the decision rule's scale."""
    corpus = [f"A {level} question about {t} number {k}. small mid large" for level in RIGHT for t in TOPICS
              for k in range(3)]
    base = tiny_router_base(tmp_path / "base", corpus, initializer_range=0.5, seed=1)
    rows = read_jsonl(data_dir / "train.jsonl")
    untrained = tmp_path / "sft" / "model"
    shutil.copytree(base, untrained)
    shutil.copy(data_dir / "router_spec.json", untrained)
    write_profiled(tmp_path / "sft", profiled_ids(rows, 0.5, 0), 0.5, 0)
    cfg = replay_cfg(max_steps=40, learning_rate=1e-3, prompts_per_step=6, temperature=1.0, seed=0,
                     rewards={"correctness": 1.0, "energy_penalty": 1.0})
    bill = run_grpo(cfg, data_dir, tmp_path / "sft", tmp_path / "grpo")["profiling"]
    prompts = json.loads((tmp_path / "grpo" / "replay_prompts.json").read_text())
    before = expected_reward(untrained, rows, prompts, cfg.temperature)
    after = expected_reward(tmp_path / "grpo" / "model", rows, prompts, cfg.temperature)
    assert after > before + 0.05, (before, after)
    assert bill["grpo_revealed"]["pairs"] < 3 * len(prompts)  # partial: not every pair of those queries was read


def test_k_at_the_pool_size_samples_with_replacement(data_dir, sft_half, tmp_path, caplog):
    """The embedded pool has 2 candidates and GRPO needs a group of 2: k >= the pool is allowed and said."""
    with caplog.at_level("INFO", logger="jouleroute.training.grpo"):
        bill = run_grpo(replay_cfg(num_generations=4, max_steps=1), data_dir, sft_half[0], tmp_path / "a")["profiling"]
    assert "sampled with replacement" in caplog.text
    reads = json.loads((tmp_path / "a" / "revealed_pairs.json").read_text())
    per_query = Counter(q for q, _c, _n in reads)
    assert per_query and max(per_query.values()) <= 3  # distinct pairs per query: at most the pool, not k
    assert bill["grpo_revealed"]["rollouts"] == sum(n for _q, _c, n in reads)


def test_replay_refuses_settings_that_would_read_everything(data_dir, sft_half, tiny_model_dir, tmp_path):
    full = tmp_path / "sft_full"
    full.mkdir()
    shutil.copytree(sft_half[0] / "model", full / "model")
    ids = [r["query_id"] for r in read_jsonl(data_dir / "train.jsonl")]
    (full / PROFILED_FILE).write_text(json.dumps({"query_ids": ids}))
    with pytest.raises(ValueError, match="tournament.train_fraction < 1"):
        run_grpo(replay_cfg(), data_dir, full, tmp_path / "b")


def test_reward_sources_are_typed():
    assert GrpoConfig(reward_source="live").reward_source == "live"  # tests/training/test_live_feedback.py
    with pytest.raises(ValidationError, match="reward_source"):
        GrpoConfig(reward_source="online")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        GrpoConfig(reward_sources="replay")
    assert GrpoConfig().reward_source == "profile" and TournamentConfig().train_fraction == 1.0


def test_accessor_counts_each_read_and_bills_distinct_pairs():
    outcomes = RevealedOutcomes({("q1", "a"): Outcome(1, 2.0), ("q1", "b"): Outcome(0, 7.0),
                                 ("q2", "a"): Outcome(1, 3.0)})
    assert outcomes.reveal("q1", "a") == Outcome(1, 2.0)
    outcomes.reveal("q1", "a")
    outcomes.reveal("q2", "a")
    assert outcomes.reads == {("q1", "a"): 2, ("q2", "a"): 1}
    assert outcomes.revealed_joules() == 5.0  # a pair read twice was run once
    with pytest.raises(KeyError, match="query_id=q3"):
        outcomes.reveal("q3", "a")
    rows = [{"energy_by_candidate": {"a": 1.5, "b": 2.5}}]
    bill = profiling_joules("estimated", "energy_j", "replay", rows, outcomes)
    assert bill["total_joules"] == 9.0 and bill["tournament"]["pairs"] == 2 and bill["grpo_revealed"]["rollouts"] == 3


def test_a_resumed_replay_run_keeps_the_reads_made_before_the_kill(data_dir, sft_half, tmp_path):
    cfg = replay_cfg(max_steps=4, save_steps=2)
    with pytest.raises(RuntimeError, match="simulated kill"):
        run_grpo(cfg, data_dir, sft_half[0], tmp_path, callbacks=[KillAt(3)])
    saved = json.loads((tmp_path / "checkpoints" / "checkpoint-2" / "revealed_pairs.json").read_text())
    assert sum(n for _q, _c, n in saved) == 2 * 2 * 2  # steps 1-2: 2 prompts x k=2, every completion a label
    metrics = run_grpo(cfg, data_dir, sft_half[0], tmp_path)
    assert metrics["resumed_from"].endswith("checkpoint-2")
    reads = {(q, c): n for q, c, n in json.loads((tmp_path / "revealed_pairs.json").read_text())}
    assert all(reads[(q, c)] >= n for q, c, n in saved)
    assert metrics["profiling"]["grpo_revealed"]["rollouts"] == 4 * 2 * 2  # step 3's lost reads are redone once


def test_the_grpo_stage_reports_profiling_joules_in_metrics_and_mlflow(data_dir, tiny_model_dir, tmp_path):
    """The `grpo` stage end to end (tracking on, a real MLflow sqlite store): its metrics.json and its run
    carry the profiling bill, labelled by source, next to a full tournament of every train query."""
    import mlflow
    import yaml

    from jouleroute.stages.context import StageContext
    from jouleroute.stages.grpo import grpo_stage
    from jouleroute.stages.sft import sft_stage

    params = {"paths": {"router_data_dir": str(data_dir), "sft_dir": "sft", "grpo_dir": "grpo",
                        "trunk_cache": "cache", "mlflow_db": "mlruns/mlflow.db"},
              "tracking": {"enabled": True, "experiment": "partial-feedback"},
              "router_data": {"lambdas": list(LAMBDAS), "label_policy": "utility"},
              # a profile of every pair from elsewhere (no tournament ran): SFT fits the train share, GRPO
              # replays the rest
              "profile_source": "replay", "tournament": {"train_fraction": 0.5},
              "sft": {"base_model": str(tiny_model_dir), "max_steps": 2, "batch_size": 4, "save_steps": 50,
                      "threads": 1},
              "grpo": {"reward_source": "replay", "num_generations": 2, "max_steps": 2, "prompts_per_step": 2,
                       "save_steps": 50, "threads": 1}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    ctx = StageContext.load(tmp_path / "params.yaml", tmp_path)
    sft_stage(ctx)
    grpo_stage(ctx)
    bill = json.loads((tmp_path / "grpo" / "metrics.json").read_text())["profiling"]
    rows = read_jsonl(data_dir / "train.jsonl")
    full = sum(e for r in rows for e in r["energy_by_candidate"].values())
    assert bill["full_train_tournament"]["joules"] == pytest.approx(full)
    assert bill["share_of_full_train_tournament"] == pytest.approx(bill["total_joules"] / full)
    assert bill["share_of_full_train_tournament"] < 1  # half the queries profiled, k=2 of 3 on a few others
    client = mlflow.MlflowClient(ctx.tracking_uri)
    experiment = client.get_experiment_by_name("partial-feedback")
    run = next(r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("stage") == "grpo")
    assert run.data.tags["profiling_energy_source"] == "estimated" and run.data.tags["reward_source"] == "replay"
    assert run.data.metrics["profiling_j.total"] == pytest.approx(bill["total_joules"])
    assert run.data.metrics["profiling_j.grpo_revealed"] == pytest.approx(bill["grpo_revealed"]["joules"])
