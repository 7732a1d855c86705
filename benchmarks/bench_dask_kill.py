"""The tournament on Dask with a worker killed mid-run: every (query, candidate) pair exactly once, and the same
answers as the serial run. What tests/orchestration/test_dask_tournament.py checks, at a size a table can quote.

A random-weight tiny Llama pool (benchmarks/bench_dask_tournament.py ``--tiny``: the pipeline tests' small params
at ``--per-task`` queries per task), a Prefect server on a free loopback port, and:

1. the serial tournament (`jouleroute tournament`) in its own folder: the reference profile;
2. the `jouleroute-tournament` flow on a Dask LocalCluster of 2 workers x 1 thread (``batches_per_job=1``: one
   shard per batch), in a thread; once ``--kill-at`` shards are on disk, one worker process gets SIGKILL (its
   nanny restarts it, Dask reschedules what it held); the flow is then run once more, as a user would after a
   failure (a no-op when Dask already recovered the run).

Counted: the pairs expected (the serial profile's), the pairs in the Dask profile, those missing, those twice in
the profile and those written twice across the shard files, answers that differ from the serial run's, shards
on disk at the kill and at the end, whether the first run completed despite the kill and what the rerun wrote,
and the worker processes before and after. Target (issue 50): 0 missing, 0 duplicated. Writes
results/dask_kill.json.

    .venv/bin/python benchmarks/bench_dask_kill.py [--per-task 4] [--kill-at 20]
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import conditions, write_result  # noqa: E402
from bench_dask_tournament import BIN, ROOT, prefect_server, tiny_params, workdir  # noqa: E402


def pairs_in_shards(shards: Path) -> tuple[int, int]:
    """(rows, rows whose pair another shard file also holds) over every shard file on disk."""
    import pandas as pd

    frames = [pd.read_parquet(p, columns=["query_id", "candidate_id"]) for p in sorted(shards.glob("*/*.parquet"))]
    if not frames:
        return 0, 0
    rows = pd.concat(frames)
    return len(rows), int(rows.duplicated(["query_id", "candidate_id"]).sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-task", type=int, default=4, help="queries per task")
    parser.add_argument("--kill-at", type=int, default=20, help="shards on disk when a worker is killed (of 42 at --per-task 4)")
    args = parser.parse_args()
    import pandas as pd

    base = Path(tempfile.mkdtemp(prefix="bench-dask-kill-"))
    params = tiny_params(base)
    params["prepare"]["samples"] = {t: args.per_task for t in params["prepare"]["samples"]}
    # tiny_params prepared 1 query per task; prepare again at --per-task (same data, same seed)
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext
    import yaml

    (base / "prepare.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(base / "prepare.yaml", base))
    serial, dask = workdir(base, "serial", params), workdir(base, "dask", params)
    (base / "prefect").mkdir()
    server, env = prefect_server(base / "prefect")
    os.environ.update(PREFECT_API_URL=env["PREFECT_API_URL"], PREFECT_HOME=env["PREFECT_HOME"],
                      PYTHONPATH=str(ROOT))
    cond = conditions()
    try:
        done = subprocess.run([str(BIN / "jouleroute"), "tournament", "--no-progress"], cwd=serial,
                              env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench_dask_kill: the serial tournament failed:\n{done.stderr[-3000:]}")
        reference = pd.read_parquet(serial / "artifacts/tournament/profile.parquet")
        result = killed_run(dask, args.kill_at)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    got = pd.read_parquet(dask / "artifacts/tournament/profile.parquet")
    expected = set(zip(reference["query_id"], reference["candidate_id"]))
    have = set(zip(got["query_id"], got["candidate_id"]))
    merged = got.merge(reference, on=["query_id", "candidate_id"], suffixes=("", "_serial"))
    rows, twice = pairs_in_shards(dask / "artifacts/tournament/shards")
    result |= {
        "pool": "tiny (random weights)", "per_task": args.per_task,
        "queries": reference["query_id"].nunique(), "candidates": reference["candidate_id"].nunique(),
        "pairs_expected": len(expected), "pairs_in_profile": len(got), "pairs_missing": len(expected - have),
        "pairs_unexpected": len(have - expected),
        "pairs_twice_in_profile": int(got.duplicated(["query_id", "candidate_id"]).sum()),
        "shard_rows": rows, "shard_rows_written_twice": twice,
        "answers_differing_from_serial": int((merged["output_text"] != merged["output_text_serial"]).sum()),
        "energy_source": sorted(got["energy_source"].unique()),
        "conditions": cond,
    }
    result["met"] = (result["pairs_missing"] == 0 and result["pairs_twice_in_profile"] == 0
                     and result["shard_rows_written_twice"] == 0 and result["kill_landed_mid_run"])
    print(json.dumps({k: v for k, v in result.items() if k != "conditions"}, indent=1))
    print(f"wrote {write_result('dask_kill', result)}")
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    return 0 if result["met"] else 1


def killed_run(work: Path, kill_at: int) -> dict:
    from distributed import Client, LocalCluster

    from flows.tournament import run_on_dask

    shards = work / "artifacts/tournament/shards"
    params, root = str(work / "params.yaml"), str(work)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local, \
            Client(local) as client:
        outcome: dict = {}
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(lambda: outcome.update(state=run_on_dask(
            params, root, dask_address=local.scheduler_address, batches_per_job=1, return_state=True)),))
        pids_before = set(client.run(os.getpid).values())
        started = time.perf_counter()
        thread.start()
        deadline = time.time() + 600
        while time.time() < deadline and len(list(shards.glob("*/*.parquet"))) < kill_at and thread.is_alive():
            time.sleep(0.05)
        at_kill = len(list(shards.glob("*/*.parquet")))
        victim = sorted(pids_before)[0]
        killed_after = time.perf_counter() - started
        os.kill(victim, signal.SIGKILL)
        thread.join(900)
        first = outcome.get("state")
        after_first = len(list(shards.glob("*/*.parquet")))
        pids_after = set(client.run(os.getpid).values())
        state = run_on_dask(params, root, dask_address=local.scheduler_address, batches_per_job=1,
                            return_state=True)
        final = len(list(shards.glob("*/*.parquet")))
    return {"workers": 2, "threads_per_worker": 1, "batches_per_job": 1, "killed_worker_after_s": round(killed_after, 2),
            "shards_at_kill": at_kill, "shards_after_first_run": after_first, "shards_final": final,
            "kill_landed_mid_run": at_kill < final and victim not in pids_after,
            "first_run_completed": bool(first is not None and first.is_completed()),
            "first_run_state": str(getattr(first, "type", first)),
            "rerun_completed": bool(state.is_completed()), "shards_written_by_rerun": final - after_first,
            "worker_restarted": len(pids_after - pids_before)}


if __name__ == "__main__":
    sys.exit(main())
