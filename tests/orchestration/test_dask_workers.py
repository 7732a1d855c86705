"""The flow's LocalCluster workers run without what Dask adds besides answering (flows/dask_workers.py).

A CPU-time energy estimate counts every thread of a worker process: Dask's nanny default
``MALLOC_TRIM_THRESHOLD_`` (page faults on every forward pass) and its statistical profiler
made the Dask tournament's answers cost 1.7x the serial run's joules. Real LocalClusters,
one worker process each; what a worker runs with is asked from the worker itself.
"""

from __future__ import annotations

import os

import pytest

from flows.dask_workers import ALLOCATOR_VAR, overhead_warnings, quiet_local_workers, worker_conditions

pytestmark = pytest.mark.timeout(300)


def conditions_of_a_local_worker() -> dict[str, dict]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            return client.run(worker_conditions)


def test_quiet_workers_have_glibc_defaults_and_no_profiler_even_after_a_leaking_nanny(monkeypatch):
    monkeypatch.setenv(ALLOCATOR_VAR, "65536")  # what an earlier nanny in this process leaves behind
    with quiet_local_workers():
        conditions = conditions_of_a_local_worker()
    assert os.environ[ALLOCATOR_VAR] == "65536"  # put back: this process's environment is not ours
    (cond,) = conditions.values()
    assert cond["allocator_trim"] is None and cond["profiler"] is False, cond
    assert overhead_warnings(conditions) == []


def test_dask_defaults_are_named_in_the_warnings(monkeypatch):
    monkeypatch.delenv(ALLOCATOR_VAR, raising=False)
    conditions = conditions_of_a_local_worker()  # Dask's defaults, as on a cluster the flow did not start
    (cond,) = conditions.values()
    assert cond["allocator_trim"] == "65536" and cond["profiler"] is True, cond
    warnings = overhead_warnings(conditions)
    assert len(warnings) == 2 and ALLOCATOR_VAR in warnings[0] and "profiler" in warnings[1]
