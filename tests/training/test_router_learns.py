"""The shipped SFT -> GRPO recipe learns the trade-off it exists for, on a tiny local model.

Toy pool: ``cheap`` (1 J) answers only "easy" queries, ``big`` (10 J) answers every query.
With max-normalized energy (cheap 0.1, big 1) the realized utility of a hard query is
``1 − λ`` for big and ``−0.1·λ`` for cheap: big is the right choice below λ = 1/0.9 ≈ 1.11,
cheap above it. The SFT labels (expected utility, task prior k = 4: p̂(big) = 1,
p̂(cheap) = 0.4 on hard queries) flip at λ = 0.6 / 0.9 ≈ 0.67. Easy queries go to cheap at
every λ. The model is a random 2-layer Llama built here (init_scale 0.5, so that its label
logits start on the scale of the decision rule); the code path is the pipeline's.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from jouleroute.routing.lm.router import LMRouter
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import read_jsonl, run_sft
from tests.conftest import tiny_router_base

TOPICS = ["apples", "trains", "rivers", "stars", "coins", "clocks", "birds", "maps", "lamps", "boats", "seeds", "tiles"]
ENERGY = {"cheap": 1.0, "big": 10.0}


def flip_tables(per_split: dict[str, int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    queries, profile = [], []
    for split, count in per_split.items():
        for level in ("easy", "hard"):
            for k in range(count):
                qid = f"{split}-{level}-{k}"
                queries.append({"query_id": qid, "task": "qa", "split": split,
                                "question": f"A {level} question about {TOPICS[k % len(TOPICS)]}."})
                for cid, energy in ENERGY.items():
                    profile.append({"query_id": qid, "candidate_id": cid, "task": "qa", "split": split,
                                    "correct": int(level == "easy" or cid == "big"), "energy_j": energy,
                                    "energy_source": "estimated"})
    return pd.DataFrame(profile), pd.DataFrame(queries)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("learns")
    profile, queries = flip_tables({"train": 12, "val": 4, "test": 4})
    corpus = [f"A {level} question about {t}." for level in ("easy", "hard") for t in TOPICS] * 3
    base = tiny_router_base(root / "base", corpus, initializer_range=0.5)
    run_router_data(profile, queries, RouterDataConfig(), root / "data")
    run_sft(SftConfig(epochs=40, learning_rate=1e-2, batch_size=8, save_steps=10_000), root / "data", base,
            root / "sft")
    run_grpo(GrpoConfig(max_steps=30, learning_rate=1e-3, save_steps=10_000), root / "data", root / "sft",
             root / "grpo")
    return root, queries[queries.split == "test"].reset_index(drop=True)


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_choice_switches_across_the_known_lambda(trained, stage):
    root, test = trained
    router = LMRouter(root / stage / "model")
    hard = test.question.str.contains("hard").to_numpy()
    low = np.array(router.route(test, lam=0.5).candidate_ids)
    high = np.array(router.route(test, lam=2.0).candidate_ids)
    assert set(low[hard]) == {"big"} and set(high[hard]) == {"cheap"}  # the switch, on unseen queries
    assert set(low[~hard]) == set(high[~hard]) == {"cheap"}  # easy queries never pay for big


def expected_reward(model_dir, rows: list[dict], lambdas) -> float:
    """Mean over (train query, λ) of E_{c ~ π_λ}[correct(c) − λ·ê(c)]: exact, no sampling."""
    router = LMRouter(model_dir)
    frame = pd.DataFrame(rows)
    scored = router.score(frame)
    total = 0.0
    for lam in lambdas:
        logits = scored.values(lam)
        policy = np.exp(logits - logits.max(axis=1, keepdims=True))
        policy /= policy.sum(axis=1, keepdims=True)
        for p, row in zip(policy, rows):
            top = max(row["energy_by_candidate"].values())
            reward = [row["correct_by_candidate"][c] - lam * row["energy_by_candidate"][c] / top
                      for c in scored.candidates]
            total += float(np.dot(p, reward))
    return total / (len(rows) * len(lambdas))


def test_grpo_raises_the_mean_reward(tmp_path):
    """GRPO from an untrained router (seeded): the exact expected reward over the train prompts goes up."""
    profile, queries = flip_tables({"train": 12, "val": 2, "test": 2})
    corpus = [f"A {level} question about {t}." for level in ("easy", "hard") for t in TOPICS] * 3
    base = tiny_router_base(tmp_path / "base", corpus, initializer_range=0.5, seed=1)
    cfg = RouterDataConfig(lambdas=(0.0, 0.5, 2.0))
    run_router_data(profile, queries, cfg, tmp_path / "data")
    untrained = tmp_path / "sft" / "model"
    shutil.copytree(base, untrained)
    shutil.copy(tmp_path / "data" / "router_spec.json", untrained)
    run_grpo(GrpoConfig(max_steps=40, learning_rate=1e-3, seed=0, save_steps=10_000), tmp_path / "data",
             tmp_path / "sft", tmp_path / "grpo")
    rows = read_jsonl(tmp_path / "data" / "train.jsonl")
    before = expected_reward(untrained, rows, cfg.lambdas)
    after = expected_reward(tmp_path / "grpo" / "model", rows, cfg.lambdas)
    assert after > before + 0.05, (before, after)


def test_soft_targets_also_learn_the_switch(tmp_path):
    """SFT on softmax(s·(p̂ − λ·ê)) targets: calibrated logits put the switch at the same λ."""
    profile, queries = flip_tables({"train": 12, "val": 2, "test": 4})
    corpus = [f"A {level} question about {t}." for level in ("easy", "hard") for t in TOPICS] * 3
    base = tiny_router_base(tmp_path / "base", corpus, initializer_range=0.5)
    run_router_data(profile, queries, RouterDataConfig(), tmp_path / "data")
    run_sft(SftConfig(epochs=40, learning_rate=1e-2, batch_size=8, save_steps=10_000, targets="soft"),
            tmp_path / "data", base, tmp_path / "sft")
    test = queries[queries.split == "test"].reset_index(drop=True)
    router = LMRouter(tmp_path / "sft" / "model")
    hard = test.question.str.contains("hard").to_numpy()
    assert set(np.array(router.route(test, lam=0.5).candidate_ids)[hard]) == {"big"}
    assert set(np.array(router.route(test, lam=2.0).candidate_ids)[hard]) == {"cheap"}
