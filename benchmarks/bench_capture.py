"""Capture under load (issue 49): what it adds to the gateway's latency, and what a kill -9 loses.

Two scripted upstreams (bench_faults.py's, answering in ``--answer-ms``) behind the router-mode gateway, run as a
process of its own (``--role gateway``, capture on when ``--capture DIR``).

- **Overhead**: ``--requests`` completions open loop at ``--rate`` per second, with capture off, then on, then off
  and on again (alternating, so the machine's load drifts evenly over both); the figure is the p95 of the
  client-measured latency with capture on over the p95 with it off (the upstreams' time is the same in both). Target:
  within 5% (a ratio measured in one run, not a timed test).
- **Durability**: capture on at ``--rate``/s; SIGKILL of the gateway ``--kill-after`` s in; every line of the
  capture read back (a torn last line skipped and counted: at most one), every captured request one the client got
  a 200 for; a second gateway on the same folder serves ``--requests`` more; after it stops, the whole folder reads
  with 0 duplicate request ids. The records lost are those still queued when the kill came.

    .venv/bin/python benchmarks/bench_capture.py [--rate 20] [--requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_faults import CANDIDATES, run_upstream, start  # noqa: E402


def run_gateway(targets: dict[str, str], port: int, capture: str | None) -> None:
    import uvicorn

    from bench_gateway import build_router
    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.capture import Capture, CaptureConfig
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream
    from jouleroute.gateway.service import Gateway

    router = build_router("knn", Path("."))
    upstreams = {c: RemoteUpstream(c, url, c, ExpectedEnergy({}, 0.1), timeout_s=30, concurrency=256)
                 for c, url in targets.items()}
    cfg = GatewayConfig.model_validate({"auth": {"keys_env": None}, "limits": {"rate_per_minute": 1e9,
                                        "burst": 10**6, "max_pending": 10_000}})
    gateway = Gateway(cfg, router, upstreams)
    if capture:
        gateway.capture = Capture(CaptureConfig(folder=capture), Path(capture), gateway.metrics.registry)
    uvicorn.run(create_app(gateway), host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _load(url: str, n: int, rate: float, offset: int = 0) -> list[dict]:
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def one(i: int) -> dict:
            body = {"model": "jouleroute-auto", "prompt": f"question {i} about topic {i % 4}", "max_tokens": 8}
            sent = time.perf_counter()
            try:
                async with session.post(url, json=body) as r:
                    await r.read()
                    return {"status": r.status, "id": r.headers.get("X-Request-Id"),
                            "latency_s": time.perf_counter() - sent}
            except Exception as error:  # the gateway killed under it: counted, not raised
                return {"status": None, "id": None, "error": type(error).__name__, "latency_s": None}

        tasks = []
        for i in range(n):
            tasks.append(asyncio.create_task(one(offset + i)))
            await asyncio.sleep(1.0 / rate)
        return list(await asyncio.gather(*tasks))


def _p95(values: list[float]) -> float:
    import numpy as np

    return float(np.percentile(values, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--answer-ms", type=float, default=50.0)
    parser.add_argument("--kill-after", type=float, default=8.0)
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--capture", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.name, args.port, 4, args.answer_ms / 4)
    if args.role == "gateway":
        return run_gateway(json.loads(args.targets), args.port, args.capture)

    from _common import conditions, write_result
    from bench_gateway import free_port, stop, wait_ready
    from jouleroute.gateway.capture import read_capture

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    me = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        targets, procs = {}, []
        for name in CANDIDATES:
            port = free_port()
            targets[name] = f"http://127.0.0.1:{port}/v1"
            procs.append(start(["--role", "upstream", "--name", name, "--port", str(port), "--answer-ms",
                                str(args.answer_ms)], work / f"up-{name}.out", me))
        for name, proc in zip(CANDIDATES, procs):
            wait_ready(targets[name] + "/models", proc)

        def gateway(capture: Path | None) -> tuple[subprocess.Popen, str]:
            port = free_port()
            extra = ["--capture", str(capture)] if capture else []
            proc = start(["--role", "gateway", "--targets", json.dumps(targets), "--port", str(port), *extra],
                         work / f"gw-{port}.out", me)
            base = f"http://127.0.0.1:{port}"
            wait_ready(base + "/readyz", proc)
            return proc, base + "/v1/completions"

        latencies: dict[str, list[float]] = {"off": [], "on": []}
        for round_ in range(2):  # off, on, off, on
            for mode in ("off", "on"):
                proc, url = gateway(work / f"overhead-{round_}" if mode == "on" else None)
                done = asyncio.run(_load(url, args.requests // 2, args.rate))
                latencies[mode] += [r["latency_s"] for r in done if r["status"] == 200]
                stop(proc)
        overhead = {"p95_off_s": _p95(latencies["off"]), "p95_on_s": _p95(latencies["on"]),
                    "answered_off": len(latencies["off"]), "answered_on": len(latencies["on"])}
        overhead["p95_ratio"] = overhead["p95_on_s"] / overhead["p95_off_s"]
        overhead["met"] = overhead["p95_ratio"] <= 1.05

        folder = work / "durable"
        proc, url = gateway(folder)

        async def killed_run() -> list[dict]:
            load = asyncio.create_task(_load(url, int(args.rate * args.kill_after * 2), args.rate))
            await asyncio.sleep(args.kill_after)
            proc.send_signal(signal.SIGKILL)
            return await load

        first = asyncio.run(killed_run())
        proc.wait()
        after_kill = read_capture(folder)
        answered = {r["id"] for r in first if r["status"] == 200}
        captured = [r["request_id"] for r in after_kill.records]
        proc, url = gateway(folder)  # the restarted gateway goes on in the same folder
        second = asyncio.run(_load(url, args.requests // 2, args.rate, offset=10_000))
        stop(proc)
        final = read_capture(folder)
        for p in procs:
            stop(p)
        durability = {"answered_before_kill": len(answered), "captured_before_kill": len(captured),
                      "captured_not_answered": len(set(captured) - answered),
                      "lost_at_kill": len(answered - set(captured)), "torn_lines": after_kill.torn,
                      "answered_after_restart": sum(r["status"] == 200 for r in second),
                      "records_final": len(final.records), "duplicates_final": final.duplicates,
                      "segments_final": final.segments}
        durability["met"] = (durability["torn_lines"] <= 1 and durability["duplicates_final"] == 0
                             and durability["captured_not_answered"] == 0)
    result = {"overhead": overhead, "durability": durability, "rate_per_s": args.rate, "requests": args.requests,
              "answer_ms": args.answer_ms, "kill_after_s": args.kill_after, "conditions": conditions()}
    print(json.dumps(result, indent=1))
    write_result("capture", result)


if __name__ == "__main__":
    main()
