"""The tournament on Dask: each shard job is a Prefect task run by prefect-dask's ``DaskTaskRunner``.

The flow is the serial stage function (``tournament_stage``) with one thing
swapped: where the jobs run. Planning (resume, quarantine of corrupt shards),
the profile, its checks and its metadata are the stage's own code. Jobs are cut
at the serial run's batch boundaries, so greedy outputs match a serial run.

Load once per worker: a worker process keeps the model it loaded for the rest of
the run (``jouleroute.tournament`` caches it per process), and jobs are handed out
so that a worker serves one model's shards in a row (``dispatch``). A worker thus
loads each model of the pool at most once per run.

Workers that cost no more than a serial run: a CPU-time estimate counts every thread of a
worker, and Dask's defaults (its nanny's allocator setting, the statistical profiler, frequent
housekeeping) made the same answers cost 1.7x the serial run's joules. The flow's LocalCluster
starts its workers without them; on an existing cluster it warns about them
(``flows/dask_workers.py``).

Workers that never meter each other: a worker runs one job at a time where it meters jobs itself, and
several workers share one node only with the CPU-time estimate (NVML and RAPL count the whole device);
``jouleroute.tournament.lanes.check_meters_apart`` refuses the rest before anything runs. Served candidates on
one exporter GPU share a lane (``dispatch``).

- ``dask_address=None``: a ``LocalCluster`` of ``n_workers`` processes x ``threads_per_worker``.
- ``dask_address="tcp://host:8786"``: an existing cluster, e.g. one worker per GPU across
  nodes (docs/orchestration.md). Workers need the same code, params and a shared
  artifact store (the shards folder), and reach the Prefect API.
"""

from __future__ import annotations

import os
from collections import deque
from contextlib import nullcontext
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.context import FlowRunContext

from flows.dask_workers import overhead_warnings, quiet_local_workers, worker_conditions
from jouleroute.config import load_params
from jouleroute.stages.context import StageContext
from jouleroute.stages.tournament import tournament_stage
from jouleroute.tournament import release_models
from jouleroute.tournament.lanes import check_meters_apart
from tasks.logs import library_logs_to
from tasks.shard import shard_task


def _dask_runner(dask_address: str | None, n_workers: int, threads_per_worker: int):
    from prefect_dask import DaskTaskRunner

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    # Each worker's share of this machine's cores: its torch threads (tasks/shard.py) stop there, so the
    # workers together never run more threads than there are cores (oversubscribed threads spin and
    # inflate both the wall time and the CPU-time energy estimate).
    cores = max(1, (os.cpu_count() or 1) // (n_workers * threads_per_worker))
    return DaskTaskRunner(cluster_kwargs={"n_workers": n_workers, "threads_per_worker": threads_per_worker,
                                          "processes": True, "dashboard_address": ":0",  # any free port
                                          "env": {"OMP_NUM_THREADS": str(cores)}})


def dispatch(jobs: list, submit, client, logger) -> list[dict]:
    """Run ``jobs`` (grouped by model, in that order) with one job per worker thread in flight.

    The next job goes to whichever worker frees up first, so each worker works through the
    queue front to back: it serves one model's shards in a row and moves on to the next
    model only when the first one's queue is empty. With the worker-side model cache that
    is one load per (worker, model). A served candidate's jobs carry their metered device (``lane``,
    ``jouleroute.tournament.lanes``: its server and exporter GPUs, merged with every candidate sharing one):
    one job per lane runs at a time, so windows on one exporter GPU never overlap; other lanes run at once
    on other workers. Submitting everything at once would let Dask spread
    and steal jobs across models, and workers would switch back and forth.
    """
    from distributed import wait

    queue, in_flight, reports = deque(jobs), {}, []
    lanes: dict = {}  # future -> lane of a served candidate's job in flight (one job per server at a time)
    while queue or in_flight:
        slots = max(1, sum(client.nthreads().values()))  # asked each time: a lost worker, an elastic cluster
        while queue and len(in_flight) < slots:
            busy = set(lanes.values())
            job = next((j for j in queue if not getattr(j, "lane", "") or j.lane not in busy), None)
            if job is None:
                break  # every queued job waits for its server's job in flight
            queue.remove(job)
            future = submit(job)
            in_flight[future.wrapped_future] = future
            if getattr(job, "lane", ""):
                lanes[future.wrapped_future] = job.lane
        with client.as_current():  # `wait` asks for the current client; the flow's may be the only one
            done = wait(list(in_flight), return_when="FIRST_COMPLETED").done
        for dask_future in done:
            lanes.pop(dask_future, None)
            reports += in_flight.pop(dask_future).result()  # raises the task's error: the flow fails with it
    logger.info("%d shard job(s) done", len(jobs))
    return reports


@flow(name="jouleroute-tournament")
def tournament_flow(params_path: str = "params.yaml", root: str = ".", batches_per_job: int = 2) -> dict:
    """Run (or resume) the tournament with its shard jobs on this flow's task runner."""
    logger = get_run_logger()
    ctx = StageContext.load(params_path, Path(root).resolve())
    client = FlowRunContext.get().task_runner.client

    def run_jobs(inp, jobs, run_id):
        # a worker of 2+ threads would run two jobs beside each other on its one meter (any cluster)
        check_meters_apart(inp.pool, inp.backend.kind, inp.energy, 1, max(client.nthreads().values(), default=1),
                           Path(params_path).name)
        logger.info("%d shard job(s) of run %s on %d worker thread(s), one model's jobs after the other",
                    len(jobs), run_id, sum(client.nthreads().values()))
        for line in overhead_warnings(client.run(worker_conditions, on_error="return")):
            logger.warning("%s", line)
        numbered = {id(job): i for i, job in enumerate(jobs)}

        def submit(job):
            name = f"{job.candidate_id}#{numbered[id(job)]}"
            return shard_task.with_options(task_run_name=name).submit(inp, job, run_id)

        try:
            return dispatch(jobs, submit, client, logger)
        finally:  # the run is over: each worker frees its models (GPU memory included) and says how many it loaded
            conditions = client.run(worker_conditions, on_error="return")  # torch is imported by now
            loads = client.run(release_models, on_error="return")
            logger.info("model loads per worker: %s", ", ".join(f"{w}: {n}" for w, n in sorted(loads.items())))
            logger.info("threads per worker (torch, OMP_NUM_THREADS): %s", ", ".join(
                f"{w}: {c.get('torch_threads')}, {c.get('omp_num_threads')}" for w, c in sorted(conditions.items())
                if isinstance(c, dict)))

    with library_logs_to(logger):
        profile = tournament_stage(ctx, run_jobs=run_jobs, batches_per_job=batches_per_job)
    return {"rows": len(profile), "energy_sources": sorted(profile["energy_source"].unique())}


def run_on_dask(params_path: str, root: str, dask_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1, batches_per_job: int = 2, return_state: bool = False):
    """Call the flow with a Dask task runner (a flow's runner is fixed per call).

    The LocalCluster is started inside the flow call, so its workers get ``QUIET_WORKERS`` there; its
    workers share this node, so a device-wide meter or several threads per worker are refused first.
    """
    if not dask_address:
        params = load_params(Path(params_path))
        check_meters_apart(params.pool, params.backend.kind, params.energy, n_workers, threads_per_worker,
                           Path(params_path).name)
    runner = _dask_runner(dask_address, n_workers, threads_per_worker)
    with nullcontext() if dask_address else quiet_local_workers():
        return tournament_flow.with_options(task_runner=runner)(
            params_path=params_path, root=root, batches_per_job=batches_per_job, return_state=return_state)
