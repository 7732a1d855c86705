"""Load test of the gateway on loopback: jouleroute-auto under >= 200 concurrent requests, against
the same requests sent straight to the upstreams, in one run.

Two upstream processes serve tiny random Llamas (jouleroute/backends/serve.py, one request at a
time, as in the tests). For each router, a gateway process sits in front of them, and:

1. ``--requests`` requests go to ``jouleroute-auto`` with ``--concurrency`` in flight, the energy
   weight cycling over the router's range; each response names the candidate that answered;
2. the same requests go straight to the upstream that answered each one, with the same concurrency.

The gateway's added p95 is ``p95(gateway) - p95(direct)``; the target is <= 10 % of the direct p95.
Routers: ``knn`` (the kNN baseline on a small synthetic profile, hashing embedder: nearly free
routing, so it shows the gateway's own machinery) as above, and ``lm`` (a trained LM router folder,
``--lm-router``, default artifacts/grpo/model when ``make run`` has produced it) at a sustained
rate instead: ``--lm-requests`` requests sent open-loop at ``--lm-rate`` per second (each at its
time, whatever is still in flight), both through the gateway and straight to the upstreams. Its
targets: >= 20 routed requests/s sustained, p95 routing latency (queue + router pass, the
``X-Jouleroute-Router-Latency-S`` header) <= 100 ms. Writes results/gateway_load.json.

    .venv/bin/python benchmarks/bench_gateway.py [--requests 400] [--concurrency 200] [--routers lm knn]
        [--lm-router artifacts/exp/L6/sft/model] [--lm-rate 20] [--lm-requests 400]
        [--queries studies/replay/artifacts/queries.parquet]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
LM_ROUTER = ROOT / "artifacts" / "grpo" / "model"
QUERIES = ROOT / "artifacts" / "prepare" / "queries.parquet"
MAX_TOKENS = 8
RANDOM_MARKER = "RANDOM_WEIGHTS.txt"  # written by benchmarks/random_router.py

from jouleroute.gateway.config import GatewayRouterConfig  # noqa: E402
from jouleroute.torch_env import inference_dtype  # noqa: E402

SERVING_PRECISION = GatewayRouterConfig.model_fields["precision"].default  # what `jouleroute serve` uses


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the processes -------------------------------------------------------------------------------

def run_upstream(model_dir: str, name: str, port: int) -> None:
    import uvicorn

    from jouleroute.backends.serve import create_app
    from jouleroute.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(model_dir, device="cpu", torch_threads=1)
    uvicorn.run(create_app(backend, name, default_max_tokens=MAX_TOKENS), host="127.0.0.1", port=port,
                log_level="warning", access_log=False)


def run_gateway(router_kind: str, router_dir: str, threads: int | None, targets: dict[str, list[str]], port: int,
                log_file: str, precision: str) -> None:
    """``targets``: candidate -> [upstream /v1 root, served model name]."""
    import logging

    import uvicorn

    from jouleroute.energy.estimate import EstimateMeter
    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.service import Gateway
    from jouleroute.gateway.remote import RemoteUpstream

    # the access log is part of the gateway's cost: keep it on, in a file
    logging.basicConfig(filename=log_file, level=logging.INFO)
    router = build_router(router_kind, Path(router_dir), threads, precision)
    expected = ExpectedEnergy({}, 0.1)
    upstreams = {c: RemoteUpstream(c, targets[c][0], targets[c][1], expected, concurrency=256)
                 for c in router.candidates}
    cfg = GatewayConfig.model_validate({"limits": {"rate_per_minute": 1e9, "burst": 10**6, "max_pending": 10_000},
                                        "auth": {"keys_env": None}})
    gateway = Gateway(cfg, router, upstreams)
    assert isinstance(router.router.meter, EstimateMeter)
    uvicorn.run(create_app(gateway), host="127.0.0.1", port=port, log_level="warning", access_log=False,
                timeout_keep_alive=30, timeout_graceful_shutdown=5)


def build_router(kind: str, router_dir: Path, threads: int | None = None, precision: str = SERVING_PRECISION):
    from jouleroute.energy.estimate import EstimateMeter
    from jouleroute.gateway.routers import ScoringGatewayRouter, lm_gateway_router

    meter = EstimateMeter()
    if kind == "lm":
        from jouleroute.config import load_params
        from jouleroute.routing.lm.router import LMRouter

        cfg = load_params(ROOT / "params.yaml").router.model_copy(update={"precision": precision})  # as served
        if threads is not None:
            cfg = cfg.model_copy(update={"threads": threads})
        return lm_gateway_router(LMRouter(router_dir, meter=meter, cfg=cfg))
    import pandas as pd

    from jouleroute.routing.baselines.config import BaselinesConfig
    from jouleroute.routing.registry import build_router as build_baseline

    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(40)], "task": "t", "split": "train",
                            "question": [f"question {i} about topic {i % 4} and number {3 * i}" for i in range(40)]})
    profile = pd.DataFrame([{"query_id": f"q{i}", "candidate_id": c, "task": "t", "split": "train",
                             "correct": int(c == "large" or i % 2 == 0), "energy_j": 10.0 if c == "large" else 1.0,
                             "energy_source": "estimated"} for i in range(40) for c in ("small", "large")])
    cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 8})
    router = build_baseline("knn", profile, queries, ["small", "large"], cfg, meter=meter)
    return ScoringGatewayRouter(router, lambda_range=(0.0, 2.0), default_lam=0.5)


def start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 180.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} not ready after {timeout_s:.0f} s")


# --- the load ------------------------------------------------------------------------------------

async def fire(jobs: list[tuple[str, dict, dict]], concurrency: int,
               rate: float | None = None) -> tuple[list[dict], float]:
    """POST every (url, body, headers) with ``concurrency`` in flight; one record per request.
    With ``rate``, open loop: request i leaves at i / rate seconds, however many are in flight.

    aiohttp, not httpx: the load generator shares the CPUs with what it measures, so it must be cheap.
    """
    import aiohttp

    gate = asyncio.Semaphore(len(jobs) if rate else concurrency)
    connector = aiohttp.TCPConnector(limit=len(jobs) if rate else concurrency, keepalive_timeout=2.0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:
        async def one(i, url, body, headers) -> dict:
            if rate:
                await asyncio.sleep(max(0.0, run_started + i / rate - time.perf_counter()))
            async with gate:
                sent = time.perf_counter()
                try:
                    async with session.post(url, json=body, headers=headers) as r:
                        text = await r.text()
                        record = {"status": r.status, "headers": {k.lower(): v for k, v in r.headers.items()},
                                  "usage": _usage(text) if r.status == 200 else {}}
                    if r.status != 200:
                        record["error"] = f"{r.status}: {text[:200]}"
                except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                    record = {"status": None, "error": f"{type(error).__name__}: {error}", "headers": {}, "usage": {}}
                record["done_at"] = time.perf_counter()
                record["latency_s"] = record["done_at"] - sent
                return record

        run_started = time.perf_counter()
        records = await asyncio.gather(*(one(i, *job) for i, job in enumerate(jobs)))
        return records, time.perf_counter() - run_started


def _usage(text: str) -> dict:
    try:
        return json.loads(text).get("usage", {}).get("jouleroute", {}) or {}
    except (ValueError, AttributeError):
        return {}


def summary(records: list[dict], wall_s: float) -> dict:
    ok = [r["latency_s"] for r in records if r["status"] == 200]
    causes = Counter(r["error"] for r in records if r["status"] != 200)
    pct = (lambda q: round(float(np.percentile(ok, q)), 4)) if ok else (lambda q: None)
    done = sorted(r["done_at"] for r in records if r["status"] == 200)
    # completions per second between the first and the last: the rate held, not diluted by the ramp
    sustained = (len(done) - 1) / (done[-1] - done[0]) if len(done) > 1 and done[-1] > done[0] else None
    return {"requests": len(records), "errors": sum(causes.values()), "error_causes": dict(causes),
            "wall_s": round(wall_s, 3), "throughput_rps": round(len(ok) / wall_s, 2),
            "sustained_rps": round(sustained, 2) if sustained is not None else None,
            "p50_s": pct(50), "p95_s": pct(95), "max_s": round(max(ok), 4) if ok else None}


def prompts(n: int, queries: Path = QUERIES, with_task: bool = False) -> list[tuple[str, str]]:
    """(prompt, task) pairs. With ``with_task`` (the LM router) and a table that names tasks: whole
    test questions with their task, as a client of a router trained on those tasks sends them (the
    router strips the task's scaffold and reads what its training read)."""
    if queries.is_file():
        import pandas as pd

        table = pd.read_parquet(queries)
        if with_task and "task" in table.columns:
            table = table[table["split"] == "test"] if "split" in table.columns else table
            rows = list(zip(table["question"].astype(str), table["task"].astype(str)))
            return [rows[i % len(rows)] for i in range(n)]
        questions = table["question"].astype(str).tolist()
        # the tail of a few-shot prompt is the query itself; keep prompts of a chat-like size
        return [(questions[i % len(questions)][-600:], "") for i in range(n)]
    return [(f"question {i} about topic {i % 4} and number {3 * i}", "") for i in range(n)]


def completion(model: str, prompt: str, task: str) -> dict:
    return {"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS} | ({"task": task} if task else {})


def bench_router(kind: str, router_dir: Path, targets: dict[str, list[str]], n: int, concurrency: int,
                 workdir: Path, upstream_pids: list[int], queries: Path, rate: float | None = None,
                 threads: int | None = None, precision: str = SERVING_PRECISION) -> dict:
    port = free_port()
    gateway = start(["--role", "gateway", "--router", kind, "--router-dir", str(router_dir),
                     *(["--threads", str(threads)] if threads else []), "--precision", precision,
                     "--targets", json.dumps(targets), "--port", str(port),
                     "--log", str(workdir / f"access-{kind}.log")], workdir / f"gateway-{kind}.out")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base + "/readyz", gateway)
        router = json.loads(get_text(base + "/readyz"))["router"]
        low, high = (0.0, 2.0)
        weights = [low + (high - low) * (i % 5) / 4 for i in range(n)]
        texts = prompts(n, queries, with_task=kind == "lm")
        warm = [(base + "/v1/completions", completion("jouleroute-auto", *texts[i]), {"X-Energy-Weight": "0.5"})
                for i in range(8)]
        asyncio.run(fire(warm, 8))
        jobs = [(base + "/v1/completions", completion("jouleroute-auto", *t), {"X-Energy-Weight": f"{w:g}"})
                for t, w in zip(texts, weights)]
        gateway_cpu = cpu_s(gateway.pid)
        via, via_wall = asyncio.run(fire(jobs, concurrency, rate))
        gateway_cpu = cpu_s(gateway.pid) - gateway_cpu
        upstream_cpu = sum(cpu_s(pid) for pid in upstream_pids)
        picks = [r["headers"].get("x-jouleroute-candidate") for r in via]
        direct_jobs = [(targets[c][0] + "/completions", completion(targets[c][1], t, ""), {})
                       for (t, _), c in zip(texts, picks) if c]
        direct, direct_wall = asyncio.run(fire(direct_jobs, concurrency, rate))
        upstream_cpu = sum(cpu_s(pid) for pid in upstream_pids) - upstream_cpu
    finally:
        stop(gateway)
    g, d = summary(via, via_wall), summary(direct, direct_wall)
    routing = [float(r["headers"]["x-jouleroute-router-latency-s"]) for r in via if r["status"] == 200]
    compute = [float(r["headers"]["x-jouleroute-router-energy-j"]) for r in via if r["status"] == 200]
    passes = [float(r["usage"]["router"]["compute_s"]) for r in via if r["usage"].get("router")]
    added = g["p95_s"] - d["p95_s"] if g["p95_s"] is not None and d["p95_s"] is not None else None
    ratio = added / d["p95_s"] if added is not None and d["p95_s"] else None
    pct = lambda values, q: round(float(np.percentile(values, q)), 4) if values else None  # noqa: E731
    result = {
        "router": router, "router_dir": str(router_dir.relative_to(ROOT)) if kind == "lm" else None,
        "lm_precision": precision if kind == "lm" else None,
        "lm_dtype": str(inference_dtype(precision, "cpu")).removeprefix("torch.") if kind == "lm" else None,
        "queries_file": str(queries.relative_to(ROOT)) if queries.is_file() else "synthetic",
        "offered_rate_rps": rate, "gateway": g, "direct": d,
        "routing_overhead_p50_s": pct(routing, 50), "routing_overhead_p95_s": pct(routing, 95),
        # in request order: a backlog that grows shows as a later half slower than the whole
        "routing_overhead_p95_second_half_s": pct(routing[len(routing) // 2:], 95),
        "router_pass_p50_s": pct(passes, 50), "router_pass_p95_s": pct(passes, 95),
        "router_energy_j_mean": round(float(np.mean(compute)), 6) if compute else None,
        "router_energy_source": "estimated", "picks": dict(Counter(p for p in picks if p)),
        # CPU per request: what the gateway (routing included) and the upstreams (direct phase) spend
        "gateway_cpu_ms_per_request": round(1000 * gateway_cpu / n, 2),
        "upstream_cpu_ms_per_request": round(1000 * upstream_cpu / max(len(direct_jobs), 1), 2),
        "added_p95_s": round(added, 4) if added is not None else None,
        "added_p95_ratio": round(ratio, 4) if ratio is not None else None,
        "target_ratio": 0.10, "target_met": bool(ratio is not None and ratio <= 0.10 and g["errors"] == 0)}
    if rate:  # the sustained-rate targets of the LM router
        result["targets_sustained"] = {"routed_rps": ">= 20", "routing_overhead_p95_s": "<= 0.1"}
        result["targets_sustained_met"] = bool(g["errors"] == 0 and g["sustained_rps"] >= 20
                                               and result["routing_overhead_p95_s"] <= 0.1)
    return result


def get_text(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=10).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--lm-requests", type=int, default=400, help="requests for the LM router, sent at --lm-rate")
    parser.add_argument("--lm-rate", type=float, default=20.0, help="LM router requests per second, open loop")
    parser.add_argument("--lm-router", type=Path, default=LM_ROUTER, help="a trained LM router folder")
    parser.add_argument("--lm-threads", type=int, default=None,
                        help="the LM router's torch threads (default: params.yaml router.threads)")
    parser.add_argument("--lm-precision", default=SERVING_PRECISION, choices=["auto", "fp32", "bf16", "native"],
                        help="the LM router's arithmetic (default: the gateway's, gateway.router.precision)")
    parser.add_argument("--precision", default=SERVING_PRECISION, help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=Path, default=QUERIES, help="a query table whose questions are the prompts")
    parser.add_argument("--routers", nargs="+", default=["knn", "lm"], choices=["lm", "knn"])
    parser.add_argument("--result", default="gateway_load", help="results/RESULT.json (default: gateway_load)")
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--router", help=argparse.SUPPRESS)
    parser.add_argument("--router-dir", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.dir, args.name, args.port)
    if args.role == "gateway":
        return run_gateway(args.router, args.router_dir, args.threads, json.loads(args.targets), args.port, args.log,
                           args.precision)

    from _common import conditions, write_result

    # a `timeout` or Ctrl-C must still stop the server processes (the finally blocks below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from jouleroute.backends.tiny import build_tiny_llama

    lm_router, queries = args.lm_router.resolve(), args.queries.resolve()
    routers = [r for r in args.routers if r != "lm" or (lm_router / "config.json").is_file()]
    skipped = sorted(set(args.routers) - set(routers))
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        procs, ports = [], {}
        for name, seed in (("tiny-a", 0), ("tiny-b", 1)):
            ports[name] = free_port()
            folder = build_tiny_llama(work / name, seed=seed)
            procs.append(start(["--role", "upstream", "--dir", str(folder), "--name", name,
                                "--port", str(ports[name])], work / f"{name}.out"))
        try:
            for name, proc in zip(ports, procs):
                wait_ready(f"http://127.0.0.1:{ports[name]}/health", proc)
            a, b = (f"http://127.0.0.1:{ports[n]}/v1" for n in ("tiny-a", "tiny-b"))
            results = {}
            for kind in routers:
                candidates = (json.loads((lm_router / "router_spec.json").read_text())["candidates"]
                              if kind == "lm" else ["small", "large"])
                targets = {c: ([a, "tiny-a"] if i % 2 == 0 else [b, "tiny-b"]) for i, c in enumerate(candidates)}
                n, rate = (args.lm_requests, args.lm_rate) if kind == "lm" else (args.requests, None)
                print(f"[{kind}] {n} requests, " + (f"{rate:g}/s" if rate else f"{min(n, args.concurrency)} in flight")
                      + " ...", flush=True)
                results[kind] = bench_router(kind, lm_router, targets, n, min(n, args.concurrency), work,
                                             [p.pid for p in procs], queries, rate, args.lm_threads,
                                             args.lm_precision)
                print(json.dumps(results[kind], indent=1), flush=True)
        finally:
            for proc in procs:
                stop(proc)
    from jouleroute.config import load_params

    payload = {"requests": args.requests, "lm_requests": args.lm_requests, "lm_rate_rps": args.lm_rate,
               "lm_threads": args.lm_threads or load_params(ROOT / "params.yaml").router.threads,
               "concurrency": args.concurrency,
               "max_tokens": MAX_TOKENS,
               "upstreams": "2 x jouleroute.backends.serve over a tiny random Llama (hidden 16), one request at a time",
               "routers": results, "skipped_routers": skipped, "conditions": cond,
               # a router folder of benchmarks/random_router.py: a trained router's architecture, random weights
               "lm_router_weights": "random" if (lm_router / RANDOM_MARKER).is_file() else "trained"}
    print(f"wrote {write_result(args.result, payload)}")


if __name__ == "__main__":
    main()
