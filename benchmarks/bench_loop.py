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
   has served the decided version for ``--settle`` s, completions open loop at ``--rate``/s, each with a
   ``--timeout``: answered, failed, hung (no answer within the timeout), and answered by each policy version
   (``X-Jouleroute-Policy-Version``), every one checked to be the old or the new. Target: 0 failed, 0 hung.

When the workspace serves nothing after init (no main pipeline champion here), a **bootstrap** round comes first:
the same traffic served by the reference candidate alone (``gateway.router: always``), one iteration that
promotes the first version without a comparison; the measured round (3-5) then runs against it.

Writes ``benchmarks/results/loop_run.json`` (``loop_run-quick.json`` with ``--quick``: 20 requests at 5/s): the
request and capture counts, the decision with its figures (the workspace's report.jsonl), the versions before and
after, the window's counts, the wall time of every step and the machine.

    .venv/bin/python benchmarks/bench_loop.py [--requests 300] [--rate 20] [--workspace loops/embedded] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_gateway import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class BenchError(RuntimeError):
    """The run cannot go on; the message says what to do (printed as one line)."""


# --- questions -------------------------------------------------------------------------------------

def questions(root: Path, seed: int, tasks: list[str] | None = None) -> list[dict]:
    """Every question of the embedded default's tasks that its prepare stage does not pick (its query table is
    rebuilt, so the exclusion holds with or without artifacts/prepare), interleaved task by task, seeded."""
    from jouleroute.benchmarks import get_task
    from jouleroute.benchmarks.prepare import build_queries
    from jouleroute.config import load_params

    params = load_params(root / "params.yaml")
    data_dir = params.paths.resolve("data_dir", root)
    if not data_dir.is_dir():
        raise BenchError(f"{data_dir}: no benchmark files; run `.venv/bin/jouleroute data fetch` (docs/data.md)")
    used = set(build_queries(params.prepare, data_dir).column("query_id").to_pylist())
    rng = random.Random(seed)
    per_task = []
    for name in tasks or params.prepare.samples:
        if name not in params.prepare.samples:
            raise BenchError(f"--tasks {name}: not a task of the embedded default ({', '.join(params.prepare.samples)})")
        task = get_task(name)
        docs = [d for d in task.load(data_dir) if d["query_id"] not in used]
        rng.shuffle(docs)
        per_task.append([{"task": name, "query_id": d["query_id"], "question": d["question"], "gold": d["gold"],
                          "choices": d["choices"]} for d in docs])
    mixed = []
    for i in range(max(len(docs) for docs in per_task)):
        mixed += [docs[i] for docs in per_task if i < len(docs)]
    return mixed


def body_of(q: dict, max_tokens: int) -> dict:
    """A completion, not a chat: the pool's gemma3-270m has no chat template, so its server refuses ``messages``
    (the capture keeps the prompt as the user turn either way)."""
    return {"model": "jouleroute-auto", "prompt": q["question"], "max_tokens": max_tokens, "task": q["task"]}


def score_of(q: dict, answer: str) -> float:
    """The served answer graded on gold by its task's grader: a user's verdict, as `POST /v1/feedback` takes it."""
    from jouleroute.benchmarks import get_task

    return float(get_task(q["task"]).grade(answer or "", q["gold"], q["choices"]).correct)


# --- the client ------------------------------------------------------------------------------------

async def _one(session, base: str, q: dict, max_tokens: int) -> dict:
    import aiohttp

    sent = time.perf_counter()
    out = {"task": q["task"], "status": None, "version": None, "candidate": None, "request_id": None,
           "outcome": "failed", "error": None, "latency_s": None, "sent_s": sent}
    try:
        async with session.post(f"{base}/v1/completions", json=body_of(q, max_tokens)) as r:
            raw = await r.read()
            out |= {"status": r.status, "version": r.headers.get("X-Jouleroute-Policy-Version"),
                    "candidate": r.headers.get("X-Jouleroute-Candidate"), "request_id": r.headers.get("X-Request-Id")}
            if r.status == 200:
                out["outcome"] = "answered"
                out["answer"] = json.loads(raw)["choices"][0].get("text") or ""
            else:
                out["error"] = raw[:200].decode("utf-8", "replace")
    except asyncio.TimeoutError:
        out |= {"outcome": "hang", "error": "no answer within the timeout"}
    except aiohttp.ClientError as error:
        out["error"] = f"{type(error).__name__}: {error}"
    out["latency_s"] = time.perf_counter() - sent
    return out


async def _traffic(base: str, qs: list[dict], concurrency: int, max_tokens: int, timeout_s: float,
                   feedback: float, bar) -> tuple[list[dict], list[int]]:
    """``qs`` at ``concurrency`` at once; a ``feedback`` share of the answered ones scored. Results, feedback statuses."""
    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    posted: list[int] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
        async def go(i: int, q: dict) -> dict:
            async with gate:
                out = await _one(session, base, q, max_tokens)
                if out["outcome"] == "answered" and int((i + 1) * feedback) > int(i * feedback):  # every 1/share-th
                    try:
                        async with session.post(f"{base}/v1/feedback", json={
                                "request_id": out["request_id"], "score": score_of(q, out.get("answer"))}) as r:
                            posted.append(r.status)
                    except (aiohttp.ClientError, asyncio.TimeoutError):
                        posted.append(0)
                bar.update(1)
                return out

        return list(await asyncio.gather(*(go(i, q) for i, q in enumerate(qs)))), posted


class OpenLoad:
    """Completions at a fixed rate (open loop: sent on schedule whether or not earlier ones answered), in a thread of
    its own, until ``stop``; each request ends by its answer, an error or the timeout (a hang)."""

    def __init__(self, base: str, qs, rate: float, timeout_s: float, max_tokens: int, bar) -> None:
        self.base, self.qs, self.rate, self.timeout_s, self.max_tokens, self.bar = base, qs, rate, timeout_s, max_tokens, bar
        self.results: list[dict] = []
        self.started = self.stopped = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> "OpenLoad":
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join()
        return self.results

    async def _run(self) -> None:
        import aiohttp

        limits = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                                         connector=limits) as session:
            tasks, i, t0 = [], 0, time.perf_counter()
            while not self._stop.is_set():
                task = asyncio.create_task(_one(session, self.base, next(self.qs), self.max_tokens))
                task.add_done_callback(lambda _: self.bar.update(1))
                tasks.append(task)
                i += 1
                await asyncio.sleep(max(0.0, t0 + i / self.rate - time.perf_counter()))
            self.stopped = time.perf_counter()
            self.results = list(await asyncio.gather(*tasks))


def summary(results: list[dict], since: float | None = None) -> dict:
    import numpy as np

    answered = [r for r in results if r["outcome"] == "answered"]
    lat = [r["latency_s"] for r in answered]
    versions: dict[str, int] = {}
    for r in answered:
        versions[r["version"]] = versions.get(r["version"], 0) + 1
    failed = [r for r in results if r["outcome"] == "failed"]
    statuses: dict[str, int] = {}
    for r in failed:
        key = str(r["status"]) if r["status"] is not None else (r["error"] or "error").split(":")[0]
        statuses[key] = statuses.get(key, 0) + 1
    candidates: dict[str, int] = {}
    for r in answered:
        candidates[r["candidate"]] = candidates.get(r["candidate"], 0) + 1
    return {"requests": len(results), "answered": len(answered), "failed": len(failed),
            "hangs": sum(r["outcome"] == "hang" for r in results), "failed_by": statuses,
            "by_version": versions, "by_candidate": candidates,
            "latency_p50_s": round(float(np.percentile(lat, 50)), 3) if lat else None,
            "latency_p95_s": round(float(np.percentile(lat, 95)), 3) if lat else None,
            "latency_max_s": round(max(lat), 3) if lat else None,
            "first_error": next((r["error"] for r in failed), None)}


# --- the processes ---------------------------------------------------------------------------------

class Processes:
    """The servers this run started, each logging to a file; stopped in reverse order however the run ends."""

    def __init__(self, logs: Path) -> None:
        self.logs, self.procs = logs, []

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "JOULEROUTE_API_KEYS"} | {"TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=(self.logs / f"{name}.log").open("w"),
                                stderr=subprocess.STDOUT, env=env)
        self.procs.append((name, proc))
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        stop(proc)
        self.procs = [(n, p) for n, p in self.procs if p is not proc]

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            stop(proc)
        self.procs = []

    def ready(self, name: str, proc: subprocess.Popen, url: str, timeout_s: float) -> None:
        try:
            wait_ready(url, proc, timeout_s)
        except RuntimeError as error:
            tail = (self.logs / f"{name}.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise BenchError(f"{name}: {error}; its log ({self.logs / f'{name}.log'}) ends: {' / '.join(tail)}") \
                from None


def gateway_params(ws, upstreams: dict[str, str], models: dict[str, str], router: dict | None, path: Path) -> Path:
    """The workspace's serve.yaml with ``gateway.upstreams`` (and for the bootstrap a fixed ``gateway.router``)."""
    params = yaml.safe_load(ws.serve_params.read_text())
    gateway = params.setdefault("gateway", {})
    gateway["upstreams"] = {cid: {"kind": "openai", "base_url": url, "served_name": models[cid], "timeout_s": 300.0,
                                   # a serve-model server answers one request at a time: under load a connection
                                   # waits its turn, which the default 5 s would turn into a 504
                                   "connect_timeout_s": 300.0}
                            for cid, url in upstreams.items()}
    if router is not None:
        gateway["router"] = router
    path.write_text(f"# {ws.rel}/serve.yaml for benchmarks/bench_loop.py: its pool behind `jouleroute serve-model` "
                    "servers on this run's ports.\n" + yaml.safe_dump(params, sort_keys=False))
    return path


def readyz(base: str) -> dict:
    import httpx

    return httpx.get(f"{base}/readyz", timeout=10).json()


def capture_gauges(base: str) -> dict:
    import httpx

    found = {}
    for line in httpx.get(f"{base}/metrics", timeout=10).text.splitlines():
        for key in ("capture_records", "capture_dropped", "feedback_records"):
            if line.startswith(f"jouleroute_gateway_{key} "):
                found[key] = int(float(line.split()[-1]))
    return found


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
    parser.add_argument("--rate", type=float, default=20.0, help="requests/s while the iteration promotes")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight while serving the traffic")
    parser.add_argument("--feedback", type=float, default=0.1, help="share of answered requests scored by a user")
    parser.add_argument("--labels", default="reference:gemma3-loglik", help="loop --init --labels")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens of every request")
    parser.add_argument("--timeout", type=float, default=60.0, help="s: a request unanswered by then is a hang")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="s the load goes on once the decided version is served (or after a refusal)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each serve-model server")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", help="comma-separated: only these of the embedded default's tasks (default: all)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 requests, 5/s; writes loop_run-quick.json")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rate = min(args.requests, 20), min(args.rate, 5.0)
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
                    "settle_s": args.settle,
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
                done, posted = asyncio.run(_traffic(base, qs, args.concurrency, args.max_tokens, args.timeout,
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
