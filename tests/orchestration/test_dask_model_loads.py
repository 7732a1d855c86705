"""`jouleroute-flow run --stages prepare models tournament` on a Dask cluster: each worker loads each model once.

A tiny git + DVC repository, two tiny models (three candidates), one query per batch so
the tournament is cut into many more shard jobs than there are (worker, model) pairs:
a design that loads per job would load 12 times. The loads are counted twice, from the
run's own records (run.json) and by asking each worker process. Energy is the labelled
CPU-time estimate (no GPU, no RAPL on this machine).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import pandas as pd
import pytest
import yaml

from tests.orchestration.conftest import small_params
from tests.pipeline.conftest import make_repo, run

pytestmark = pytest.mark.timeout(600)


def two_model_params(tiny_model, second_dir) -> dict:
    params = small_params(tiny_model)
    shutil.copytree(tiny_model, second_dir)  # the same weights in another folder: another model to load
    params["models"]["tiny2"] = {"source": "local", "path": str(second_dir), "chat_template": True}
    params["pool"][1]["model"] = "tiny2"  # pool order tiny, tiny2, tiny: jobs must still come grouped by model
    for cand in params["pool"]:
        cand["batch_size"] = 1
    return params


def test_each_worker_loads_each_model_once_and_the_flow_names_stale_stages(tmp_path, tiny_model, prefect_server):
    from distributed import Client, LocalCluster

    from flows.pipeline import pipeline
    from jouleroute.tournament import loaded_count

    repo = make_repo(tmp_path / "repo", two_model_params(tiny_model, tmp_path / "tiny2"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        # no client of the test's while the flow runs: the flow's own is the only one, as from the CLI
        state = pipeline(params_path=str(repo / "params.yaml"), root=str(repo),
                         stages=["prepare", "models", "tournament"], dask_address=cluster.scheduler_address,
                         return_state=True)
        assert state.is_completed(), state.message
        with Client(cluster) as client:
            per_worker = client.run(loaded_count)  # what each worker process itself counted in this run
            worker_pids = set(client.run(os.getpid).values())

    run_meta = json.loads((repo / "artifacts/tournament/run.json").read_text())
    latest = json.loads(run_meta["run_state"])["runs"][-1]
    loads = [r for r in latest["model_loads"] if r["phase"] == "load"]
    assert latest["jobs"] == 12  # 3 candidates x 7 queries, one query per batch, 2 batches per job
    assert Counter((r["worker"], r["model"]) for r in loads).most_common(1)[0][1] == 1
    assert len(loads) <= 2 * 2 and {r["model"] for r in loads} == {"tiny", "tiny2"}
    assert sum(per_worker.values()) == len(loads) == run_meta["model_loading"]["load"]["count"]
    assert {int(r["worker"].rsplit(":", 1)[1]) for r in loads} <= worker_pids  # loaded on the workers, not here
    assert all(r["energy_source"] == "estimated" and r["energy_j"] >= 0 and r["time_s"] > 0 for r in loads)
    profile = pd.read_parquet(repo / "artifacts/tournament/profile.parquet")
    assert len(profile) == 21 and not profile.duplicated(["query_id", "candidate_id"]).any()

    # the flow says what the Dask run left stale, as DVC sees it: every stage after the tournament
    order = list(yaml.safe_load((repo / "dvc.yaml").read_text())["stages"])
    after = order[order.index("tournament") + 1:]
    assert f"stages are now stale: {', '.join(after)}" in state.message
    status = json.loads(run(["dvc", "status", "--json", "tournament"], repo).stdout or "{}")
    assert status == {}, status  # the Dask result is committed: `dvc repro` will not run the tournament again

