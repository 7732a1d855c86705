"""One tournament job as a Prefect task: on a Dask worker, metered on that worker's own device."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from jouleroute.tournament import ShardJob, TournamentInputs, run_job
from tasks.logs import library_logs_to


# A lost worker is handled by Dask (it reschedules the call); retries cover a task that raised.
# run_job skips batches whose shard exists, so a retry never stores a pair twice.
@task(name="tournament-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def shard_task(inp: TournamentInputs, job: ShardJob, run_id: str) -> list[dict]:
    logger = get_run_logger()
    with library_logs_to(logger):
        reports = run_job(inp, job, run_id)
    for r in reports:
        logger.info("shard %s: %d rows, %.3f J (%s) in %.2f s on %s", r["shard"], r["rows"], r["energy_j"],
                    r["energy_source"], r["window_s"], r["worker"])
    if not reports:
        logger.info("every batch of this job was already stored: nothing recomputed")
    return reports
