"""A tournament killed with SIGKILL midway resumes where it stopped: same pairs, no duplicates."""

from __future__ import annotations

import os
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
    params["paths"]["data_dir"] = str(REPO / "data/benchmarks")
    for cand in params["pool"]:
        cand["batch_size"] = 2  # many small shards, so the kill lands between and inside batches
    params["tracking"]["enabled"] = False
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([str(BIN / "jouleroute"), "--no-progress", "prepare"], path)
    return path


def pairs(profile: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(profile["query_id"], profile["candidate_id"]))


@pytest.mark.timeout(600)
def test_kill_midway_then_rerun_matches_uninterrupted_run(tmp_path, tiny_model):
    whole = make_workdir(tmp_path / "whole", tiny_model)
    run([str(BIN / "jouleroute"), "--no-progress", "tournament"], whole)
    reference = pd.read_parquet(whole / "artifacts/tournament/profile.parquet")

    killed = make_workdir(tmp_path / "killed", tiny_model)
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


def test_finished_tournament_is_not_recomputed(tmp_path, tiny_model):
    work = make_workdir(tmp_path / "done", tiny_model)
    run([str(BIN / "jouleroute"), "--no-progress", "tournament"], work)
    first = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    run([str(BIN / "jouleroute"), "tournament"], work)
    again = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    assert set(again["run_id"]) == set(first["run_id"])
