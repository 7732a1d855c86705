"""grpo.reward_source live on the embedded default (issue 19): the tournament profiles its share of the train
queries only (tournament.train_fraction), router_data lists the others for GRPO, SFT fits what was profiled, replay refuses what was not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import toy_tables

from jouleroute.config import Params
from jouleroute.stages.context import StageContext
from jouleroute.stages.tournament import profiled_queries
from jouleroute.tournament.config import TournamentConfig
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.partial_feedback import PROFILED_FILE, profiled_ids
from jouleroute.training.router_data import UNPROFILED, run_router_data
from jouleroute.training.sft import read_jsonl, run_sft


def context(**sections) -> StageContext:
    return StageContext(Params(**sections), Path("."), Path("params.yaml"))


def test_the_tournament_runs_its_own_train_share_and_reads_no_training_key():
    _profile, queries = toy_tables({"train": 4, "val": 2, "test": 1})
    train = queries[queries["split"] == "train"]
    live = context(tournament=TournamentConfig(train_fraction=0.5, seed=3), grpo=GrpoConfig(reward_source="live"))
    chosen = profiled_queries(live, queries)
    assert set(chosen.loc[chosen["split"] == "train", "query_id"]) == set(profiled_ids(train.to_dict("records"), 0.5, 3))
    assert 0 < (chosen["split"] == "train").sum() < len(train)
    assert set(chosen.loc[chosen["split"] != "train", "query_id"]) == set(queries.loc[queries["split"] != "train",
                                                                                      "query_id"])
    # no share: the tournament runs every query, whatever the training keys say (it reads only its own section)
    for other in (context(grpo=GrpoConfig(reward_source="replay"), sft=SftConfig(seed=3)),
                  context(grpo=GrpoConfig(reward_source="live"))):
        assert profiled_queries(other, queries).equals(queries)


def test_the_train_share_is_one_key_and_a_share_the_tournament_leaves_needs_live_rollouts():
    """tournament.train_fraction is the train share: SFT has no key of its own to keep equal to it."""
    assert "full_profile_fraction" not in SftConfig.model_fields
    with pytest.raises(ValueError, match="cannot answer"):
        Params(tournament={"train_fraction": 0.5}, grpo={"reward_source": "profile"})
    Params(tournament={"train_fraction": 0.5}, grpo={"reward_source": "live"}, sft={"seed": 7})
    Params(profile_source="replay", tournament={"train_fraction": 0.5}, grpo={"reward_source": "replay"})


@pytest.fixture(scope="module")
def split(tmp_path_factory, tiny_model_dir):
    """router_data and SFT on a profile that holds the SFT share of train only (what the live tournament writes)."""
    root = tmp_path_factory.mktemp("live-split")
    profile, queries = toy_tables({"train": 4, "val": 1, "test": 1})
    train = queries[queries["split"] == "train"]
    kept = set(profiled_ids(train.to_dict("records"), 0.5, 0))
    profile = profile[(profile["split"] != "train") | profile["query_id"].isin(kept)]
    stats = run_router_data(profile, queries, RouterDataConfig(lambdas=(0.0, 2.0), label_policy="utility"),
                            root / "data")
    cfg = SftConfig(max_steps=1, batch_size=4, learning_rate=1e-2, save_steps=50)
    run_sft(cfg, root / "data", tiny_model_dir, root / "sft", share=0.5)
    return root, queries, kept, stats


def test_router_data_lists_the_unprofiled_train_queries_and_sft_fits_the_rest(split):
    root, queries, kept, stats = split
    train = set(queries.loc[queries["split"] == "train", "query_id"])
    unprofiled = read_jsonl(root / "data" / UNPROFILED)
    assert {r["query_id"] for r in unprofiled} == train - kept and stats["n_unprofiled_train_queries"] == len(unprofiled)
    assert all(set(r) == {"query_id", "task", "question"} for r in unprofiled)  # no outcome: none was run
    assert {r["query_id"] for r in read_jsonl(root / "data" / "train.jsonl")} == kept
    fitted = json.loads((root / "sft" / PROFILED_FILE).read_text())
    assert set(fitted["query_ids"]) == kept  # the share was drawn once, by the tournament: not halved again


def test_replay_refuses_train_queries_without_outcomes(split, tmp_path):
    root, *_ = split
    with pytest.raises(ValueError, match="have no tournament outcome"):
        run_grpo(GrpoConfig(reward_source="replay", num_generations=2, max_steps=1), root / "data", root / "sft",
                 tmp_path)
