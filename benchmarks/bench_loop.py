"""The loop run by hand on the embedded default (issue 49, docs/loop.md "Run it by hand"), as one script.

1. **init**: `jouleroute-flow loop --init <workspace> --capture artifacts/capture/<name> --labels <labels>`; the
   workspace serves the main pipeline's deployed policy first when there is one (artifacts/evaluate/champion);
2. **servers**: one `jouleroute serve-model` per pool model (smollm2-135m, gemma3-270m) on a loopback port, and
   the gateway, `jouleroute --params <workspace>/bench/serve.yaml serve`: the workspace's serve.yaml (capture on,
   the promotion watch on) plus ``gateway.upstreams`` sending each candidate to its model's server. The script
   writes that copy rather than init taking an option: the ports are this run's, and serve.yaml stays what
   `--init` writes for a user;
3. **traffic**: ``--requests`` completions (`/v1/completions`: gemma3-270m has no chat template) at ``--concurrency``, real questions of the data root's benchmark
   files (jouleroute.benchmarks, the embedded default's tasks, none of the queries its prepare stage picks), each
   naming its task in the gateway's ``task`` field (the capture keeps it, so the labels grade with that task's
   grader); a ``--feedback`` share of them scored by `POST /v1/feedback` (the served answer graded on gold);
4. **one iteration**: `jouleroute-flow --params <workspace>/params.yaml loop` (fold, data version, the loop's
   stages, gate, promote or refuse, record), each stage timed as it lands in the workspace's dvc.lock;
5. **the reload window**: from the moment evaluate finishes (the gate and the promotion follow) until the gateway
   has served the decided version for ``--settle`` s, completions open loop at ``--rate``/s (default: half the rate
   the real models answered step 3 at, so the window measures the reload, not their capacity), each with a
   ``--timeout``: answered, failed, hung (no answer within the timeout), and answered by each policy version
   (``X-Jouleroute-Policy-Version``), every one checked to be the old or the new. Target: 0 failed, 0 hung.

When the workspace serves nothing after init (no main pipeline champion here), a **bootstrap** round comes first:
the same traffic served by the reference candidate alone (``gateway.router: always``), one iteration that
promotes the first version without a comparison; the measured round (3-5) then runs against it.

Writes ``benchmarks/results/loop_run.json`` (``loop_run-quick.json`` with ``--quick``: 20 requests): the
request and capture counts, the decision with its figures (the workspace's report.jsonl), the versions before and
after, the window's counts, the wall time of every step and the machine.

    .venv/bin/python benchmarks/bench_loop.py [--requests 300] [--rate R] [--workspace loops/embedded] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_gateway import free_port  # noqa: E402
from loop_traffic import (BenchError, OpenLoad, Processes, capture_gauges, closed_loop, gateway_params,  # noqa: E402
                          questions, readyz, summary)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


# --- the iteration ---------------------------------------------------------------------------------

def lock_entries(ws) -> dict:
    lock = ws.folder / "dvc.lock"
    try:
        return (yaml.safe_load(lock.read_text()) or {}).get("stages", {}) if lock.is_file() else {}
    except yaml.YAMLError:  # read while DVC rewrites it
        return {}


def run_iteration(ws, logs: Path, label: str, on_evaluated=None) -> dict:
    """`jouleroute-flow --params <ws>/params.yaml loop`, its stages timed as they land in dvc.lock; ``on_evaluated``
    is called once evaluate has landed (the gate and the promotion come next)."""
    from tqdm import tqdm

    stages = list((yaml.safe_load(ws.dvc_file.read_text()) or {})["stages"])
    before = lock_entries(ws)
    log = logs / f"iteration-{label}.log"
    started = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "jouleroute-flow"), "--params", f"{ws.rel}/params.yaml", "loop"], cwd=ROOT,
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})
    done: dict[str, float] = {}
    called = False
    with tqdm(total=len(stages), desc=f"iteration ({label})", unit="stage") as bar:
        while True:
            finished = proc.poll() is not None
            now = lock_entries(ws)
            for name in stages:
                if name not in done and name in now and now[name] != before.get(name):
                    done[name] = round(time.perf_counter() - started, 1)
                    bar.set_postfix_str(name)
                    bar.update(1)
            if on_evaluated is not None and not called and ("evaluate" in done or finished):
                called = True
                on_evaluated()
            if finished:
                break
            time.sleep(1.0)
    wall = round(time.perf_counter() - started, 1)
    tail = log.read_text(errors="replace").strip().splitlines()
    if proc.returncode != 0:
        raise BenchError(f"the loop iteration ({label}) failed ({proc.returncode}): "
                         f"{next((l for l in reversed(tail) if 'jouleroute-loop' in l), tail[-1] if tail else '')} "
                         f"(log: {log})")
    ends = sorted(done.items(), key=lambda kv: kv[1])
    per_stage, last = {}, 0.0
    for name, at in ends:
        per_stage[name], last = round(at - last, 1), at
    return {"wall_s": wall, "stage_done_at_s": done, "stage_wall_s": per_stage,
            "after_stages_s": round(wall - last, 1), "flow_says": next((l for l in reversed(tail)
                                                                       if l.startswith("jouleroute-loop")), None)}


def report_entries(ws) -> list[dict]:
    if not ws.report_jsonl.is_file():
        return []
    return [json.loads(l) for l in ws.report_jsonl.read_text().splitlines() if l.strip()]


def decision_of(entry: dict) -> dict:
    g = entry.get("gate") or {}
    return {"iteration": entry["iteration"], "decision": entry["decision"], "reason": entry["reason"],
            "served_after": entry["served"], "candidate_version": entry.get("candidate_version"),
            "serving_version_before": g.get("serving_version"), "n_test_queries": g.get("n_queries"),
            "candidate": g.get("candidate"), "serving": g.get("serving"), "accuracy_diff": g.get("accuracy_diff"),
            "accuracy_diff_ci": g.get("accuracy_diff_ci"), "energy_ratio": g.get("energy_ratio"),
            "energy_ratio_ci": g.get("energy_ratio_ci"), "margin": g.get("margin"),
            "drift_share": (g.get("drift") or {}).get("share"), "folded": entry.get("folded"),
            "mlflow_run_id": entry.get("mlflow_run_id")}


# --- the run ---------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspace", default="loops/embedded", help="the loop workspace to create (must not exist)")
    parser.add_argument("--requests", type=int, default=300, help="requests served with capture on before the iteration")
    parser.add_argument("--rate", type=float, default=None,
                        help="requests/s while the iteration promotes (default: half the rate the real models "
                             "answered the measured traffic at, so the window measures the reload, not their "
                             "capacity; bench_reload.py measures the reload at 20/s)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight while serving the traffic")
    parser.add_argument("--feedback", type=float, default=0.1, help="share of answered requests scored by a user")
    parser.add_argument("--labels", default="reference:gemma3-loglik", help="loop --init --labels")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens of every request")
    parser.add_argument("--timeout", type=float, default=60.0, help="s: a request unanswered by then is a hang")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="s the load goes on once the decided version is served (or after a refusal)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each serve-model server")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", help="comma-separated: only these of the embedded default's tasks (default: all)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 requests; writes loop_run-quick.json")
    args = parser.parse_args()
    if args.quick:
        args.requests = min(args.requests, 20)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = run(args)
    except (BenchError, OSError, ValueError) as error:
        print(f"bench_loop: {error}", file=sys.stderr)
        return 1
    from _common import write_result

    path = write_result("loop_run-quick" if args.quick else "loop_run", result)
    print(json.dumps({k: result[k] for k in ("decision", "window", "versions")}, indent=1, default=str))
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


def run(args) -> dict:
    from tqdm import tqdm

    from _common import conditions
    from jouleroute.config import load_params
    from jouleroute.gateway.capture import FEEDBACK, read_capture
    from jouleroute.loop import serving
    from jouleroute.loop.workspace import Workspace

    walls: dict[str, float] = {}
    loads: dict[str, list[float]] = {}

    def timed(step: str, fn):
        started = time.perf_counter()
        out = fn()
        walls[step] = round(time.perf_counter() - started, 1)
        loads[step] = [round(x, 2) for x in os.getloadavg()]
        return out

    folder = (ROOT / args.workspace).resolve()
    if not folder.is_relative_to(ROOT):
        raise BenchError(f"--workspace {args.workspace}: the loop workspace must lie inside the repository ({ROOT})")
    ws = Workspace(ROOT, folder)
    if ws.config_file.exists() or ws.dvc_file.exists():
        raise BenchError(f"{ws.rel}: a loop workspace is already here; remove it (and mlruns/loop-{ws.name}) or give "
                         "--workspace another folder")
    capture = f"artifacts/capture/{ws.name}"
    if (ROOT / capture).exists() and any((ROOT / capture).iterdir()):
        raise BenchError(f"{capture}: holds an earlier run's capture; remove it first (the loop would fold it)")
    main_params = load_params(ROOT / "params.yaml")
    pool = {c.candidate_id: c.model for c in main_params.pool}
    for model in sorted(set(pool.values())):
        if not (main_params.paths.resolve("models_dir", ROOT) / model / "config.json").is_file():
            raise BenchError(f"artifacts/models/{model}: not converted; run `.venv/bin/jouleroute repro models`")
    conditions_before = conditions()
    asked = timed("questions", lambda: questions(
        ROOT, args.seed, args.tasks.split(",") if args.tasks else None))
    stream = itertools.cycle(asked)  # distinct until the pool is spent (thousands), then again

    init = timed("init", lambda: subprocess.run(
        [str(BIN / "jouleroute-flow"), "loop", "--init", ws.rel, "--capture", capture, "--labels", args.labels],
        cwd=ROOT, capture_output=True, text=True))
    if init.returncode != 0:
        raise BenchError(f"loop --init failed: {(init.stdout + init.stderr).strip().splitlines()[-1]}")
    logs = ws.folder / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    with (ws.folder / ".gitignore").open("a") as handle:
        handle.write("/bench/\n")  # this run's logs and gateway params
    adopted = serving.serving_folder(ws.serving)
    result: dict = {"quick": args.quick, "workspace": ws.rel, "capture": capture, "labels": args.labels,
                    "requests": args.requests, "rate_per_s": args.rate, "concurrency": args.concurrency,
                    "max_tokens": args.max_tokens, "timeout_s": args.timeout, "feedback_share": args.feedback,
                    "settle_s": args.settle, "seed": args.seed,
                    "first_served": "adopted: the main pipeline's deployed policy" if adopted else
                    "bootstrap: no main pipeline champion here, so a first iteration served it",
                    "tasks": args.tasks.split(",") if args.tasks else list(main_params.prepare.samples)}

    procs = Processes(logs)
    try:
        upstreams, models = {}, {}

        def start_models() -> None:
            started = []
            for model in sorted(set(pool.values())):
                port = free_port()
                proc = procs.start(f"serve-model-{model}", [
                    str(BIN / "jouleroute"), "--params", f"{ws.rel}/params.yaml", "serve-model", model,
                    "--port", str(port), "--device", "cpu", "--threads", str(args.threads),
                    "--max-tokens", str(args.max_tokens)])
                started.append((model, port, proc))
            for model, port, proc in started:
                procs.ready(f"serve-model-{model}", proc, f"http://127.0.0.1:{port}/v1/models", 600)
                for cid, m in pool.items():
                    if m == model:
                        upstreams[cid], models[cid] = f"http://127.0.0.1:{port}/v1", model

        timed("serve_models_ready", start_models)

        def start_gateway(name: str, router: dict | None) -> tuple[subprocess.Popen, str]:
            cfg = gateway_params(ws, upstreams, models, router, logs / f"{name}.yaml")
            port = free_port()
            proc = procs.start(name, [str(BIN / "jouleroute"), "--params", str(cfg.relative_to(ROOT)), "serve",
                                      "--port", str(port)])
            base = f"http://127.0.0.1:{port}"
            procs.ready(name, proc, f"{base}/readyz", 900)
            return proc, base

        def traffic(base: str, label: str) -> dict:
            qs = [next(stream) for _ in range(args.requests)]
            with tqdm(total=len(qs), desc=f"traffic ({label})", unit="req") as bar:
                done, posted = asyncio.run(closed_loop(base, qs, args.concurrency, args.max_tokens, args.timeout,
                                                    args.feedback, bar))
            out = summary(done)
            if not out["answered"]:
                raise BenchError(f"traffic ({label}): none of {len(qs)} requests answered; the first: "
                                 f"{out['first_error']} (logs: {logs})")
            out["feedback_posted"] = len(posted)
            out["feedback_accepted"] = sum(s == 202 for s in posted)
            out["gateway_capture"] = capture_gauges(base)
            return out

        if adopted is None:
            reference = args.labels.partition(":")[2] or next(iter(pool))
            boot = {}
            proc, base = timed("bootstrap_gateway_ready", lambda: start_gateway(
                "gateway-bootstrap", {"kind": "always", "candidate": reference}))
            boot["served_by"] = readyz(base)["version"]
            boot["traffic"] = timed("bootstrap_traffic", lambda: traffic(base, "bootstrap"))
            procs.stop(proc)
            boot["iteration"] = timed("bootstrap_iteration", lambda: run_iteration(ws, logs, "bootstrap"))
            entries = report_entries(ws)
            if not entries or serving.serving_folder(ws.serving) is None:
                raise BenchError(f"the bootstrap iteration served nothing ({entries[-1]['reason'] if entries else 'no report line'}); "
                                 f"see {ws.rel}/report.md and {logs}/iteration-bootstrap.log")
            boot["decision"] = decision_of(entries[-1])
            result["bootstrap"] = boot

        proc, base = timed("gateway_ready", lambda: start_gateway("gateway", None))
        before = readyz(base)["version"]
        result["traffic"] = timed("traffic", lambda: traffic(base, "measured"))
        capacity = result["traffic"]["answered"] / max(walls["traffic"], 1e-9)
        result["traffic"]["answered_per_s"] = round(capacity, 3)
        if args.rate is None:  # a sustainable open-loop rate: half what the models answered at closed loop
            args.rate = round(capacity / 2, 3)
            result["rate_per_s"] = args.rate
            result["rate_chosen_by"] = "half the measured traffic's answered rate"

        window: dict = {}
        load_box: dict = {}

        def open_window() -> None:
            bar = tqdm(desc=f"reload window ({args.rate:g}/s)", unit="req", position=1, leave=True)
            load_box["bar"] = bar
            load_box["load"] = OpenLoad(base, stream, args.rate, args.timeout, args.max_tokens, bar).start()

        iteration = timed("iteration", lambda: run_iteration(ws, logs, "measured", open_window))
        entries = report_entries(ws)
        entry = entries[-1] if entries else None
        if entry is None:
            raise BenchError(f"the iteration recorded no decision (see {logs}/iteration-measured.log)")
        decided = entry["served"]

        def settle() -> dict:
            deadline = time.monotonic() + max(60.0, 20 * float(yaml.safe_load(ws.serve_params.read_text())
                                                               ["gateway"].get("reload_poll_s") or 2))
            seen_new_at = None
            while time.monotonic() < deadline:
                version = readyz(base)["version"]
                if version == decided:
                    seen_new_at = time.perf_counter()
                    break
                time.sleep(0.5)
            time.sleep(args.settle)
            return {"served_decided_version": seen_new_at is not None,
                    "decided_served_after_s": None if seen_new_at is None or "load" not in load_box else
                    round(seen_new_at - load_box["load"].started, 1)}

        window |= timed("window_settle", settle)
        if "load" in load_box:
            done = load_box["load"].stop()
            load_box["bar"].close()
            window |= summary(done)
            window["duration_s"] = round(load_box["load"].stopped - load_box["load"].started, 1)
            window["offered_rate_per_s"] = round(len(done) / max(window["duration_s"], 1e-9), 2)
            window["unexpected_versions"] = sorted({v for v in window["by_version"] if v not in (before, decided)})
            window["met"] = window["failed"] == 0 and window["hangs"] == 0 and not window["unexpected_versions"]
        after = readyz(base)["version"]
        gauges = capture_gauges(base)
    finally:
        procs.stop_all()

    captured, fed = read_capture(ROOT / capture), read_capture(ROOT / capture, FEEDBACK)
    result |= {
        "versions": {"before": before, "candidate": entry.get("candidate_version"), "decided": decided,
                     "after": after, "changed": before != after},
        "decision": decision_of(entry),
        "iteration": iteration,
        "window": window,
        "capture": {"records": len(captured.records), "torn_lines": captured.torn, "duplicates": captured.duplicates,
                    "segments": captured.segments, "feedback_records": len(fed.records),
                    "gateway_last": gauges},
        "report": entries,
        "wall_s": walls,
        "load_avg_after_step": loads,
        "conditions": conditions_before,
    }
    return result


if __name__ == "__main__":
    sys.exit(main())
