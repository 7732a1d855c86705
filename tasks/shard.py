"""One tournament job as a Prefect task: on a Dask worker, metered on that worker's own device.

The worker process keeps the model it loads (``jouleroute.tournament``'s per-process
cache), so the next job of the same model on this worker starts answering at once.
"""

from __future__ import annotations

import os

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from jouleroute.tournament import ShardJob, TournamentInputs, run_job
from tasks.logs import library_logs_to


def worker_cpu_threads() -> int | None:
    """This worker's share of the cores: the OMP_NUM_THREADS its Dask nanny gave it (1 by Dask's default)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


# A lost worker is handled by Dask (it reschedules the call); retries cover a task that raised.
# run_job skips batches whose shard exists, so a retry never stores a pair twice.
@task(name="tournament-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def shard_task(inp: TournamentInputs, job: ShardJob, run_id: str) -> list[dict]:
    logger = get_run_logger()
    with library_logs_to(logger):
        reports = run_job(inp, job, run_id, cpu_threads=worker_cpu_threads())
    for r in reports:
        for load in r.get("model_loads", []):
            logger.info("%s of %s for %s: %.2f s, %.3f J (%s) on %s, not part of any query's energy_j",
                        load["phase"], load["model"], load["candidate_id"], load["time_s"], load["energy_j"],
                        load["energy_source"], load["worker"])
        logger.info("shard %s: %d rows, %.3f J (%s) in %.2f s on %s", r["shard"], r["rows"], r["energy_j"],
                    r["energy_source"], r["window_s"], r["worker"])
    if not reports:
        logger.info("every batch of this job was already stored: nothing recomputed")
    return reports
