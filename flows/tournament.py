"""The tournament on Dask: each shard job is a Prefect task run by prefect-dask's ``DaskTaskRunner``.

The flow is the serial stage function (``tournament_stage``) with one thing
swapped: where the jobs run. Planning (resume, quarantine of corrupt shards),
the profile, its checks and its metadata are the stage's own code. Jobs are cut
at the serial run's batch boundaries, so greedy outputs match a serial run.

- ``dask_address=None``: a ``LocalCluster`` of ``n_workers`` processes x ``threads_per_worker``.
- ``dask_address="tcp://host:8786"``: an existing cluster, e.g. one worker per GPU across
  nodes (docs/orchestration.md). Workers need the same code, params and a shared
  artifact store (the shards folder), and reach the Prefect API.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from jouleroute.stages.context import StageContext
from jouleroute.stages.tournament import tournament_stage
from tasks.logs import library_logs_to
from tasks.shard import shard_task


def _dask_runner(dask_address: str | None, n_workers: int, threads_per_worker: int):
    from prefect_dask import DaskTaskRunner

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": n_workers, "threads_per_worker": threads_per_worker,
                                          "processes": True, "dashboard_address": ":0"})  # any free port


@flow(name="jouleroute-tournament")
def tournament_flow(params_path: str = "params.yaml", root: str = ".", batches_per_job: int = 2) -> dict:
    """Run (or resume) the tournament with its shard jobs on this flow's task runner."""
    logger = get_run_logger()
    ctx = StageContext.load(params_path, Path(root).resolve())

    def run_jobs(inp, jobs, run_id):
        logger.info("submitting %d shard job(s) of run %s", len(jobs), run_id)
        futures = [shard_task.with_options(task_run_name=f"{job.candidate_id}#{i}").submit(inp, job, run_id)
                   for i, job in enumerate(jobs)]
        return [report for future in futures for report in future.result()]

    with library_logs_to(logger):
        profile = tournament_stage(ctx, run_jobs=run_jobs, batches_per_job=batches_per_job)
    return {"rows": len(profile), "energy_sources": sorted(profile["energy_source"].unique())}


def run_on_dask(params_path: str, root: str, dask_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1, batches_per_job: int = 2, return_state: bool = False):
    """Call the flow with a Dask task runner (a flow's runner is fixed per call)."""
    runner = _dask_runner(dask_address, n_workers, threads_per_worker)
    return tournament_flow.with_options(task_runner=runner)(
        params_path=params_path, root=root, batches_per_job=batches_per_job, return_state=return_state)
