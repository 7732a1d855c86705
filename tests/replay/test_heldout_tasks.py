"""replay.test_tasks: the leave-tasks-out split of the studies/heldout-* presets, on the real RouterBench files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from jouleroute.replay import ReplayConfig, run_replay
from jouleroute.replay.stage import _config_json, config_run_id

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "data" / "external" / "outcomes" / "routerbench"


def _ids(stem: str, eval_name: str) -> set[str]:
    return {f"routerbench/{eval_name}/{s}" for s in pd.read_csv(SOURCE / f"{stem}.csv", usecols=["sample_id"])["sample_id"]}


@pytest.fixture(scope="module")
def heldout(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("heldout")
    cfg = ReplayConfig(tasks=("mbpp", "winogrande"), test_tasks=("mbpp",))
    summary = run_replay(cfg, REPO_ROOT, out / "queries.parquet", out / "profile.parquet")
    return {"cfg": cfg, "summary": summary, "queries": pd.read_parquet(out / "queries.parquet"),
            "profile": pd.read_parquet(out / "profile.parquet")}


def test_test_split_is_exactly_the_held_out_task_s_test_rows(heldout: dict) -> None:
    queries = heldout["queries"]
    test = queries[queries["split"] == "test"]
    assert set(test["task"]) == {"mbpp"}
    assert set(test["query_id"]) == _ids("mbpp_test", "mbpp")


def test_train_and_val_come_only_from_the_other_task_s_train_rows(heldout: dict) -> None:
    queries = heldout["queries"]
    seen = queries[queries["split"].isin(["train", "val"])]
    assert set(seen["task"]) == {"winogrande"}
    assert set(seen["query_id"]) == _ids("winograde_train", "winogrande")
    assert (queries["split"] == "val").sum() > 0  # model selection still has a val split, from the train task
    assert not queries["query_id"].isin(_ids("winograde_test", "winogrande") | _ids("mbpp_train", "mbpp")).any()


def test_profile_follows_the_query_table(heldout: dict) -> None:
    profile, queries = heldout["profile"], heldout["queries"]
    assert set(profile["query_id"]) == set(queries["query_id"])
    split_of = dict(zip(queries["query_id"], queries["split"]))
    assert (profile["split"] == profile["query_id"].map(split_of)).all()
    assert (profile.groupby("query_id")["candidate_id"].nunique() == 6).all()
    assert heldout["summary"]["test_tasks"] == ["mbpp"]
    assert profile["run_id"].iloc[0] != config_run_id("replay-routerbench", _config_json(ReplayConfig()))


def test_default_replay_run_id_is_unchanged_by_the_new_field() -> None:
    # The default replay's run id: test_tasks (git 3261796) left it unchanged; it changed once when the run id
    # stopped hashing the data folders (the data root moved them, docs/data.md), and a folder no longer moves
    # it. Update this only when the default replay params change on purpose.
    assert config_run_id("replay-routerbench", _config_json(ReplayConfig())) == "replay-routerbench-8b435bdab0f7"
    moved = ReplayConfig(source_dir="elsewhere/routerbench", energy={"reference_dir": "elsewhere/mlenergy"})
    assert config_run_id("replay-routerbench", _config_json(moved)) == "replay-routerbench-8b435bdab0f7"
    assert "test_tasks" not in ReplayConfig().model_dump_json(exclude={"test_tasks"})


@pytest.mark.parametrize(
    ("tasks", "test_tasks", "message"),
    [
        (("mbpp", "winogrande"), ("arc_challenge",), "not in replay.tasks"),
        (("mbpp", "winogrande"), ("mbpp", "winogrande"), "nothing is left to train on"),
    ],
)
def test_bad_test_tasks_are_rejected(tasks: tuple, test_tasks: tuple, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ReplayConfig(tasks=tasks, test_tasks=test_tasks)
