"""A tournament killed with SIGKILL midway, or left with a torn shard and a corrupt state file,
resumes where it stopped: same pairs as an uninterrupted run, no duplicates."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pandas as pd
import pytest
import yaml

from tests.pipeline.conftest import BIN, REPO, run, tiny_params


def make_workdir(path, model_dir):
    path.mkdir()
    params = tiny_params(model_dir)
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    for cand in params["pool"]:
        cand["batch_size"] = 2  # many small shards, so the kill lands between and inside batches
    params["tracking"]["enabled"] = False
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for stage in ("prepare", "models"):  # the tournament's inputs, as under dvc repro
        run([str(BIN / "jouleroute"), "--no-progress", stage], path)
    return path


def pairs(profile: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(profile["query_id"], profile["candidate_id"]))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, tiny_model):
    """A workdir with the tournament's inputs and no tournament yet; each run below starts from a copy."""
    return make_workdir(tmp_path_factory.mktemp("resume") / "prepared", tiny_model)


def copy_of(prepared, path):
    shutil.copytree(prepared, path, symlinks=True)
    return path


@pytest.fixture(scope="module")
def whole(tmp_path_factory, prepared):
    """An uninterrupted run: the reference every resumed run must match."""
    work = copy_of(prepared, tmp_path_factory.mktemp("resume") / "whole")
    run([str(BIN / "jouleroute"), "--no-progress", "tournament"], work)
    return work


@pytest.mark.timeout(600)
def test_kill_midway_then_rerun_matches_uninterrupted_run(tmp_path, prepared, whole):
    reference = pd.read_parquet(whole / "artifacts/tournament/profile.parquet")

    killed = copy_of(prepared, tmp_path / "killed")
    shards = killed / "artifacts/tournament/shards"
    proc = subprocess.Popen([str(BIN / "jouleroute"), "--no-progress", "tournament"], cwd=killed,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and len(list(shards.glob("*/*.parquet"))) < 5:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(list(shards.glob("*/*.parquet")))
    total_batches = len(list((whole / "artifacts/tournament/shards").glob("*/*.parquet")))
    assert 5 <= partial < total_batches, "the kill must land midway"
    assert not (killed / "artifacts/tournament/profile.parquet").exists()

    run([str(BIN / "jouleroute"), "--no-progress", "tournament"], killed)
    resumed = pd.read_parquet(killed / "artifacts/tournament/profile.parquet")
    assert not resumed.duplicated(["query_id", "candidate_id"]).any()
    assert pairs(resumed) == pairs(reference)
    assert resumed["run_id"].nunique() == 2  # rows from before the kill were kept, not recomputed
    # greedy decoding is deterministic: the answers match the uninterrupted run
    merged = resumed.merge(reference, on=["query_id", "candidate_id"], suffixes=("", "_ref"))
    assert (merged["output_text"] == merged["output_text_ref"]).all()


def test_torn_shard_and_corrupt_state_are_quarantined_and_recomputed(tmp_path, whole):
    reference = pd.read_parquet(whole / "artifacts/tournament/profile.parquet")
    work = tmp_path / "torn"
    shutil.copytree(whole, work)
    shards = work / "artifacts/tournament/shards"
    torn = sorted(shards.glob("*/*.parquet"))[3]
    torn_pairs = pairs(pd.read_parquet(torn))
    torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])  # a write cut off halfway
    (shards / "state.json").write_text('{"config_hash": "abc", "runs": [')  # and a torn state file

    done = run([str(BIN / "jouleroute"), "--no-progress", "tournament"], work)
    for bad in (torn, shards / "state.json"):
        assert f"{bad} is corrupt" in done.stderr, done.stderr[-3000:]
    quarantined = sorted(p.name for p in (shards / "_quarantine").iterdir())
    assert len(quarantined) == 2, quarantined
    assert quarantined[0].startswith("state.json.") and quarantined[1].startswith(f"{torn.parent.name}__{torn.name}.")
    resumed = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    assert not resumed.duplicated(["query_id", "candidate_id"]).any()
    assert pairs(resumed) == pairs(reference)
    recomputed = resumed[~resumed["run_id"].isin(set(reference["run_id"]))]
    assert pairs(recomputed) == torn_pairs  # only the torn shard's pairs; the state's loss cost nothing
    merged = resumed.merge(reference, on=["query_id", "candidate_id"], suffixes=("", "_ref"))
    assert (merged["output_text"] == merged["output_text_ref"]).all()


def test_finished_tournament_is_not_recomputed(whole):
    first = pd.read_parquet(whole / "artifacts/tournament/profile.parquet")
    run([str(BIN / "jouleroute"), "tournament"], whole)
    again = pd.read_parquet(whole / "artifacts/tournament/profile.parquet")
    assert set(again["run_id"]) == set(first["run_id"])
