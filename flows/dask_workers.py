"""What a Dask worker does besides answering, and how the tournament's workers are kept from paying for it.

Where no energy counter is readable, a worker meters itself with the labelled CPU-time
estimate (``jouleroute.energy.EstimateMeter``): the CPU time of *every* thread of its
process during a window. Measured on this 2-core machine (one worker, SmolLM2-135M, batches
of 8 real queries, per-thread CPU from /proc/self/task, one run each on the shared machine), a
Dask worker with Dask's defaults spent:

- about 1.6x a plain process's CPU in the answering thread itself, the excess mostly system time:
  Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``
  (``distributed.nanny.pre-spawn-environ``), which also turns off glibc's dynamic mmap
  threshold, so every activation tensor above 128 KiB is mapped fresh and page-faulted on
  each forward pass and handed back to the kernel after it;
- 0.42 s of CPU in the event-loop thread per CPU second of the answering thread, 0.27 s of it the
  statistical profiler (``distributed.worker.profile``: a stack sample of every thread every
  10 ms, deep in a transformer's forward pass) and the rest event-loop ticks (every 20 ms),
  the memory monitor (every 100 ms) and the system monitor (every 500 ms).

None of it answers a query, and serial runs pay none of it. The flow's own LocalCluster
starts its workers with ``QUIET_WORKERS`` (same allocator as a plain process, no profiler,
slower housekeeping): the answering thread then costs what a plain process's does, and the
event loop 0.03 s per answering second. On an existing cluster
the flow cannot choose, so it asks each worker (``worker_conditions``) and warns about what
it finds; docs/orchestration.md gives the worker config that avoids it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

ALLOCATOR_VAR = "MALLOC_TRIM_THRESHOLD_"

QUIET_WORKERS = {
    # glibc's own dynamic thresholds, as in the serial process (None unsets a pre-spawn variable)
    f"distributed.nanny.pre-spawn-environ.{ALLOCATOR_VAR}": None,
    # the dashboard's profile page: not needed to run shards; re-enable it to look at a slow worker
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "200ms",  # blocked-loop warnings still fire after tick.limit (3 s)
    "distributed.worker.memory.monitor-interval": "1s",  # a model is loaded once; memory is flat afterwards
    "distributed.admin.system-monitor.interval": "2s",
}


@contextmanager
def quiet_local_workers() -> Iterator[None]:
    """Dask config for the workers of a LocalCluster started inside this block (and their restarts).

    A nanny started earlier in this process (another LocalCluster) leaves Dask's allocator
    variable in ``os.environ`` (Dask documents that leak), and a spawned worker would inherit
    it whatever the config says: it is taken out for the block and put back afterwards.
    """
    import dask
    import distributed  # noqa: F401  its defaults enter dask.config on import: leaving the block before
    # they were there would remove the whole `distributed` section along with these keys

    leaked = os.environ.pop(ALLOCATOR_VAR, None)
    try:
        with dask.config.set(QUIET_WORKERS):
            yield
    finally:
        if leaked is not None:
            os.environ[ALLOCATOR_VAR] = leaked


def worker_conditions() -> dict:
    """What this worker process runs with (``client.run`` calls it on every worker)."""
    import sys

    import dask

    torch = sys.modules.get("torch")  # only if a job already imported it: asking must not load torch
    return {
        "allocator_trim": os.environ.get(ALLOCATOR_VAR),
        "profiler": bool(dask.config.get("distributed.worker.profile.enabled")),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }


def overhead_warnings(conditions: dict[str, dict]) -> list[str]:
    """One line per worker setting that makes the CPU-time estimate count work that answers nothing."""
    lines = []
    for worker, cond in sorted(conditions.items()):
        if not isinstance(cond, dict):  # client.run(on_error="return") gives the worker's exception
            continue
        if cond.get("allocator_trim"):
            lines.append(f"{worker}: {ALLOCATOR_VAR}={cond['allocator_trim']} (Dask's nanny default) turns off "
                         "glibc's dynamic mmap threshold: each forward pass page-faults its tensors again "
                         "(about +50% CPU per query on a CPU worker); set distributed.nanny.pre-spawn-environ."
                         f"{ALLOCATOR_VAR}: null in the workers' Dask config (docs/orchestration.md)")
        if cond.get("profiler"):
            lines.append(f"{worker}: Dask's statistical profiler samples every thread every 10 ms; a CPU-time "
                         "estimate counts it in every query's window (set distributed.worker.profile.enabled: "
                         "false)")
    return lines
