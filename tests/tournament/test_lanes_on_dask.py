"""The lanes on Dask (flows/tournament.py ``dispatch``): served candidates on one exporter GPU never run at
once, even on a worker with two threads, and client-metered jobs never share a worker's process.

A real Prefect server and Dask LocalCluster (one worker, two threads: two jobs can run beside each other);
the node is loopback_node.py's (real HTTP servers and a DCGM-format exporter over simulated GPUs, in this
test process, which the worker reaches over loopback).
"""

from __future__ import annotations

import pytest

from tests.orchestration.conftest import prefect_server  # noqa: F401  (the real Prefect server fixture)
from tests.served.test_served_tournament import make_root, served_params

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(prefect_server):  # noqa: F811
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as local:
        yield local.scheduler_address


def node_params(node, metered: bool) -> dict:
    """Two candidates on two servers of one node, both on its GPU 0: on its exporter, or measured on the client."""
    exporter = node.exporter()
    servers = {name: {"server": node.server([0], gpu_s=0.15)} for name in ("a", "b")}
    params = served_params(servers, {"a": exporter, "b": exporter})
    params["backend"] |= {"stream": False, "concurrency": 1}
    params["energy"] = {"meter": "estimate", "idle_seconds": 0.2, "served_client_estimate": not metered}
    for entry in params["pool"]:
        entry["energy"] = {"exporter_url": exporter, "gpus": [0], "j_per_output_token": 0.1}
        if not metered:
            del entry["energy"]
    return params


def test_two_servers_on_one_gpu_run_one_after_the_other_on_dask(node, tmp_path, cluster):
    import pandas as pd

    from flows.tournament import run_on_dask

    root = make_root(tmp_path, node_params(node, metered=True))
    busy_before = node.busy_j
    state = run_on_dask(str(root / "params.yaml"), str(root), dask_address=cluster, batches_per_job=1,
                        return_state=True)
    assert state.is_completed(), state
    profile = pd.read_parquet(root / "artifacts/tournament/profile.parquet")
    assert set(profile["energy_source"]) == {"measured-nvml"}
    assert node.overlaps == 0, "the worker's two threads ran both servers' requests on GPU 0 at once"
    assert profile["energy_net_j"].sum() == pytest.approx(node.busy_j - busy_before, rel=0.1)


def test_client_metered_jobs_on_a_two_thread_worker_are_refused(node, tmp_path, cluster):
    from flows.tournament import run_on_dask

    root = make_root(tmp_path, node_params(node, metered=False))
    state = run_on_dask(str(root / "params.yaml"), str(root), dask_address=cluster, return_state=True)
    assert state.is_failed() and "2 threads per Dask worker" in state.message, state
    assert not (root / "artifacts/tournament/profile.parquet").exists()
