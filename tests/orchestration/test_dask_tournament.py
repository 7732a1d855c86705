"""The tournament's shards as Prefect tasks on a Dask LocalCluster (2 workers x 1 thread).

The flow attaches to a cluster the test starts (the `--dask-address` path), so the test
can kill one of its workers mid-run. Energy here is the labelled CPU-time estimate
(no GPU, no RAPL on this machine): each worker meters its own process.
"""

from __future__ import annotations

import contextvars
import json
import os
import signal
import threading
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from tests.orchestration.conftest import small_params
from tests.pipeline.conftest import REPO

pytestmark = pytest.mark.timeout(600)


def workdir(path, model_dir):
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext

    path.mkdir(parents=True)
    params = small_params(model_dir)
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(path / "params.yaml", path))
    return path


def profile(path) -> pd.DataFrame:
    return pd.read_parquet(path / "artifacts/tournament/profile.parquet")


def assert_same_as(got: pd.DataFrame, reference: pd.DataFrame) -> None:
    assert not got.duplicated(["query_id", "candidate_id"]).any()
    assert set(zip(got["query_id"], got["candidate_id"])) == set(zip(reference["query_id"], reference["candidate_id"]))
    merged = got.merge(reference, on=["query_id", "candidate_id"], suffixes=("", "_ref"))
    assert (merged["output_text"] == merged["output_text_ref"]).all()  # greedy: identical answers


@pytest.fixture(scope="module")
def serial(tmp_path_factory, tiny_model):
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.tournament import tournament_stage

    work = workdir(tmp_path_factory.mktemp("serial") / "w", tiny_model)
    tournament_stage(StageContext.load(work / "params.yaml", work))
    return profile(work)


@pytest.fixture(scope="module")
def cluster(prefect_server):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local, \
            Client(local) as client:
        yield local, client


def test_dask_run_survives_a_killed_worker_and_equals_serial(tmp_path, tiny_model, serial, cluster):
    from flows.tournament import run_on_dask

    local, client = cluster
    work = workdir(tmp_path / "dask", tiny_model)
    shards = work / "artifacts/tournament/shards"
    params, root = str(work / "params.yaml"), str(work)
    result = {}
    context = contextvars.copy_context()  # the thread must talk to the test's Prefect server too
    thread = threading.Thread(target=context.run, args=(lambda: result.update(state=run_on_dask(
        params, root, dask_address=local.scheduler_address, batches_per_job=1, return_state=True)),))
    pids = set(client.run(os.getpid).values())
    thread.start()
    deadline = time.time() + 240
    while time.time() < deadline and len(list(shards.glob("*/*.parquet"))) < 3:
        time.sleep(0.05)
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)  # mid-run; the nanny restarts it, Dask reschedules what it was running
    thread.join(300)
    assert not thread.is_alive()
    assert len(list(shards.glob("*/*.parquet"))) > 3, "the kill must land midway"
    pids |= set(client.run(os.getpid).values())
    # the rerun (a no-op if Dask already recovered the run by itself) completes; nothing is stored twice
    state = run_on_dask(params, root, dask_address=local.scheduler_address, batches_per_job=1, return_state=True)
    assert state.is_completed(), (result.get("state"), state)
    got = profile(work)
    assert_same_as(got, serial)
    assert set(got["energy_source"]) == {"estimated"}
    files = sorted(shards.glob("*/*.parquet"))
    metas = [json.loads(pq.read_schema(p).metadata[b"jouleroute.shard"]) for p in files]
    assert {int(m["worker"].rsplit(":", 1)[1]) for m in metas} <= pids  # metered on the workers, not here
    assert all(m["meter"] == "estimated" and m["idle_power_w"] >= 0 for m in metas)
    runs = json.loads((shards / "state.json").read_text())["runs"]
    attributed = [s for run in runs for s in run.get("shards", [])]  # per-shard energy, per worker
    assert attributed and {s["shard"] for s in attributed} <= {f"{p.parent.name}/{p.name}" for p in files}
    assert all(s["energy_j"] > 0 and s["energy_source"] == "estimated" for s in attributed)
