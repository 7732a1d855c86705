"""The tournament on Dask against the serial tournament, same pool, same cores, one run.

Runs the embedded default's tournament twice, back to back, each from empty shards:

1. serial: `jouleroute tournament` (what `dvc repro` runs), one process;
2. Dask: the `jouleroute-tournament` Prefect flow on a LocalCluster of 2 workers x 1 thread
   (what `jouleroute-flow run --dask-workers 2` runs for the stage), against a Prefect
   server this script starts on a free loopback port.

Both are timed end to end as subprocesses (interpreter start and imports included, the
Dask cluster's start included). Reported as ratios: wall time, the sum of per-query
`energy_j`, the number of model loads against the number of shard jobs (the loads a
job-per-load design would make), and whether the two profiles agree on `correct`,
`output_tokens` and `output_text` for every pair. The machine's load average is recorded
before, between and after, since other work on the machine moves both runs.

    .venv/bin/python benchmarks/bench_dask_tournament.py            # the real embedded pool (needs
                                                                   # `jouleroute repro prepare models`)
    .venv/bin/python benchmarks/bench_dask_tournament.py --per-task 12   # the real pool on 12 queries per task
    .venv/bin/python benchmarks/bench_dask_tournament.py --tiny     # a random-weight tiny model, 7 queries

`--per-task N` keeps the first N prepared queries of each task (by query id): the same
models and prompts on fewer queries, for a machine too busy for the whole set. It is
recorded in the result, as is `--torch-threads` (default: params' backend.torch_threads,
which the serial run uses; each Dask worker caps it at its share of the cores).

Writes benchmarks/results/dask_tournament.json (dask_tournament-tiny.json with --tiny,
dask_tournament-per-task<N>.json with --per-task N, so a reduced run never replaces a full one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from _common import conditions, write_result

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGETS = {"wall_ratio_max": 1.3, "energy_ratio_band": [0.9, 1.1]}
DASK_RUN = """
import sys
from flows.tournament import run_on_dask
state = run_on_dask(sys.argv[1], sys.argv[2], n_workers=int(sys.argv[3]), threads_per_worker=1, return_state=True)
sys.exit(0 if state.is_completed() else 1)
"""


def real_params(work: Path, per_task: int | None) -> dict:
    import pandas as pd

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for name in ("queries", "models_dir", "data_dir"):  # read from the repository's own artifacts
        params["paths"][name] = str(ROOT / params["paths"][name])
    missing = [p for p in (params["paths"]["queries"], *(Path(params["paths"]["models_dir"]) / m / "config.json"
                                                         for m in params["models"])) if not Path(p).exists()]
    if missing:
        sys.exit(f"bench_dask_tournament: {missing[0]} is missing: run `.venv/bin/jouleroute repro prepare models`")
    if per_task:
        queries = pd.read_parquet(params["paths"]["queries"]).sort_values(["task", "query_id"])
        queries.groupby("task").head(per_task).to_parquet(work / "queries.parquet", index=False)
        params["paths"]["queries"] = str(work / "queries.parquet")
    return params


def tiny_params(work: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext
    from tests.orchestration.conftest import small_params

    params = small_params(build_tiny_llama(work / "tiny-model"))
    params["paths"]["data_dir"] = str(ROOT / "data/external/benchmarks")
    params["paths"]["queries"] = str(work / "queries.parquet")
    params["paths"]["models_dir"] = str(work / "models")  # a local model: the folder only has to exist
    (work / "models").mkdir()
    (work / "prepare.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(work / "prepare.yaml", work))
    return params


def workdir(base: Path, name: str, params: dict) -> Path:
    """A folder with its own params: shards, profile and metadata land there, the inputs are shared."""
    work = base / name
    work.mkdir(parents=True)
    params = json.loads(json.dumps(params))
    params["tracking"]["enabled"] = False  # the repository's MLflow store stays untouched
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return work


def timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"bench_dask_tournament: {' '.join(cmd[:3])} failed; see {log}:\n{log.read_text()[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s_all_processes": round(cpu, 2), "load_avg_1m_at_start": round(load, 2)}


def outcome(work: Path) -> dict:
    import pandas as pd

    profile = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    run = json.loads((work / "artifacts/tournament/run.json").read_text())
    latest = json.loads(run["run_state"])["runs"][-1]
    loading = run["model_loading"]
    return {
        "pairs": len(profile),
        "energy_j_sum": round(float(profile["energy_j"].sum()), 3),
        "energy_j_per_candidate": {c: round(float(g["energy_j"].sum()), 3) for c, g in profile.groupby("candidate_id")},
        "energy_source": sorted(profile["energy_source"].unique()),
        "jobs": latest["jobs"],
        "model_loads": loading["load"]["count"],
        "loads_per_worker_model": loading["load"]["per_worker_model"],
        "load_time_s": loading["load"]["time_s"],
        "load_energy_j": loading["load"]["energy_j"],
        "warmup_energy_j": loading["warmup"]["energy_j"],
        "loading_energy_source": loading["load"]["energy_source"],
        "workers": len(latest["workers"]),
        # the meter's idle power per process: CPU its threads spend with nothing to answer (the event
        # loop, heartbeats, a profiler), which the estimate also counts inside every query's window
        "idle_power_w": {w: round(v["idle_power_w"], 4) for w, v in sorted(latest["workers"].items())},
    }


def agreement(serial: Path, dask: Path) -> dict:
    import pandas as pd

    a = pd.read_parquet(serial / "artifacts/tournament/profile.parquet")
    b = pd.read_parquet(dask / "artifacts/tournament/profile.parquet")
    merged = a.merge(b, on=["query_id", "candidate_id"], suffixes=("_serial", "_dask"))
    share = lambda col: round(float((merged[f"{col}_serial"] == merged[f"{col}_dask"]).mean()), 4)
    return {"pairs_matched": len(merged), "duplicates_dask": int(b.duplicated(["query_id", "candidate_id"]).sum()),
            "same_correct": share("correct"), "same_output_tokens": share("output_tokens"),
            "same_output_text": share("output_text")}


def prefect_server(home: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=open(home / "server.log", "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    import httpx

    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, env
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    sys.exit(f"bench_dask_tournament: the Prefect server did not start; see {home / 'server.log'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a random-weight tiny model instead of the real pool")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-task", type=int, metavar="N", help="the first N prepared queries of each task")
    parser.add_argument("--torch-threads", type=int, metavar="N", help="backend.torch_threads for both runs")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    base = Path(tempfile.mkdtemp(prefix="bench-dask-tournament-"))
    params = tiny_params(base) if args.tiny else real_params(base, args.per_task)
    if args.torch_threads:
        params["backend"]["torch_threads"] = args.torch_threads
    serial, dask = workdir(base, "serial", params), workdir(base, "dask", params)
    (base / "prefect").mkdir()
    server, env = prefect_server(base / "prefect")
    env = {**env, "PYTHONPATH": str(ROOT), "PATH": f"{BIN}:{os.environ['PATH']}"}
    cond = conditions()
    try:
        runs = {"serial": timed([str(BIN / "jouleroute"), "tournament", "--no-progress"], serial, env,
                                base / "serial.log")}
        print(f"serial: {runs['serial']}", flush=True)
        runs["dask"] = timed([str(sys.executable), "-c", DASK_RUN, str(dask / "params.yaml"), str(dask),
                              str(args.workers)], dask, env, base / "dask.log")
        print(f"dask:   {runs['dask']}", flush=True)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    for name, work in (("serial", serial), ("dask", dask)):
        runs[name].update(outcome(work))
    s, d = runs["serial"], runs["dask"]
    models = len({c["model"] for c in params["pool"]})
    ratios = {"wall_dask_over_serial": round(d["wall_s"] / s["wall_s"], 3),
              "energy_dask_over_serial": round(d["energy_j_sum"] / s["energy_j_sum"], 3),
              "cpu_dask_over_serial": round(d["cpu_s_all_processes"] / s["cpu_s_all_processes"], 3)}
    result = {
        "pool": "tiny (random weights)" if args.tiny else "embedded default (params.yaml)",
        "per_task": args.per_task,
        "queries": s["pairs"] // len(params["pool"]), "candidates": len(params["pool"]), "models": models,
        "dask_workers": args.workers, "threads_per_worker": 1, "torch_threads_param": params["backend"]["torch_threads"],
        "serial": s, "dask": d, "ratios": ratios, "agreement": agreement(serial, dask),
        "targets": {**TARGETS, "model_loads_max": args.workers * models},
        "met": {"wall": ratios["wall_dask_over_serial"] <= TARGETS["wall_ratio_max"],
                "energy": TARGETS["energy_ratio_band"][0] <= ratios["energy_dask_over_serial"]
                <= TARGETS["energy_ratio_band"][1],
                "loads": d["model_loads"] <= args.workers * models},
        "conditions": cond,
    }
    result["conditions"]["load_avg_1m_between"] = runs["dask"]["load_avg_1m_at_start"]
    name = "dask_tournament-tiny" if args.tiny else f"dask_tournament-per-task{args.per_task}" if args.per_task \
        else "dask_tournament"
    path = write_result(name, result)
    print(json.dumps({k: result[k] for k in ("ratios", "agreement", "met")}, indent=2))
    print(f"-> {path}" + (f" (scratch: {base})" if args.keep else ""))
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
