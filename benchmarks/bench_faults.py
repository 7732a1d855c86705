"""Faults under load on loopback: what every request gets while an upstream process dies (or freezes).

**Router mode** (``--part router``). Two upstream processes, ``small`` and ``large``, answer completions from a
script, token by token (``--tokens`` tokens, ``--token-ms`` apart: a stream is in flight for a while) or, not
streaming, whole after the same time. A gateway process (``jouleroute.gateway``: the kNN router on a synthetic
profile as in bench_gateway.py, ``fallback: true``, each upstream's ``timeout_s`` = ``--timeout``) stands in front.
``--requests`` requests, half of them streaming, go to ``jouleroute-auto`` with ``--concurrency`` in flight, the
energy weight cycling so the router picks both candidates; ``--kill-after`` seconds in, the upstream ``--victim``
gets SIGKILL (``--fault kill``) or SIGSTOP (``--fault freeze``: its connections stay open and say nothing, so
only the timeouts end them). Every request is put in one class:

- ``answered``: 200 and the whole answer (a stream ends with ``[DONE]``), with no fallback;
- ``fallback``: 200 and the whole answer from the other candidate, ``X-Jouleroute-Fallback-From`` naming the victim;
- ``clean_error``: a 502/504 whose message names the victim, or a stream (already answering when the victim died,
  so it cannot fall back) that ends with an error event naming it;
- ``hang``: no end within the client's limit (every candidate's ``timeout_s`` plus the answer's time plus 10 s);
- ``other``: anything else (a 5xx that names no upstream, a stream cut without an error event, a truncated body).

The gateway's access log must hold one line per request (``records``: missing and duplicated request ids).

**Cascade mode** (``--part cascade``). bench_cascade.py's three scripted upstreams and chain ``[[a, b], [c]]``,
requests open loop at ``--rate`` per second; ``--cascade-kill-after`` seconds in, ``a`` (stage 1) gets SIGKILL. Counted:
answered, lost (anything but a 200 with an answer), escalations by reason (from ``X-Jouleroute-Cascade-Reasons``;
checked against the gateway's ``/metrics``), calls that failed, and the access log's records.

Targets (issue 50): 0 hangs, 0 ``other``, 0 lost, 0 missing or duplicated records. Writes results/faults.json
(both parts; ``--part`` reruns one and keeps the other's record).

    .venv/bin/python benchmarks/bench_faults.py [--part router cascade] [--fault kill freeze]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the router and cascade modes, and the processes they start (bench_capture.py and bench_reload.py import
# CANDIDATES, run_upstream and start from here)
from faults_cascade_mode import bench_cascade  # noqa: E402
from faults_processes import CANDIDATES, run_gateway, run_upstream, start  # noqa: E402
from faults_router_mode import bench_router  # noqa: E402

__all__ = ["CANDIDATES", "bench_cascade", "bench_router", "main", "run_gateway", "run_upstream", "start"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="+", default=["router", "cascade"], choices=["router", "cascade"])
    parser.add_argument("--fault", nargs="+", default=["kill", "freeze"], choices=["kill", "freeze"],
                        help="router mode: SIGKILL the victim, or SIGSTOP it (only timeouts end its requests)")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=40, help="tokens per answer")
    parser.add_argument("--token-ms", type=float, default=50.0, help="ms between streamed tokens")
    parser.add_argument("--timeout", type=float, default=10.0, help="each upstream's timeout_s")
    parser.add_argument("--victim", default="large", choices=CANDIDATES)
    parser.add_argument("--kill-after", type=float, default=1.5,
                        help="router mode: seconds into the load (the first 200 answers are then mid-stream)")
    parser.add_argument("--cascade-kill-after", type=float, default=3.0, help="cascade mode: seconds into the load")
    parser.add_argument("--rate", type=float, default=20.0, help="cascade: requests per second, open loop")
    parser.add_argument("--cascade-requests", type=int, default=400)
    parser.add_argument("--stage1-ms", type=float, default=50.0)
    parser.add_argument("--stage2-ms", type=float, default=200.0)
    parser.add_argument("--agree", type=float, default=0.7)
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.name, args.port, args.tokens, args.token_ms)
    if args.role == "gateway":
        return run_gateway(json.loads(args.targets), args.port, args.log, args.timeout)

    from _common import RESULTS, conditions, write_result

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `timeout` still stops the server processes
    previous = RESULTS / "faults.json"
    result = json.loads(previous.read_text()) if previous.is_file() else {}
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        if "router" in args.part:
            result["router"] = {}
            for fault in args.fault:
                print(f"[router, {fault}] {args.requests} requests, {args.concurrency} in flight ...", flush=True)
                result["router"][fault] = bench_router(args, fault, Path(tmp)) | {"conditions": cond}
                print(json.dumps(result["router"][fault], indent=1, default=str), flush=True)
        if "cascade" in args.part:
            print(f"[cascade] {args.cascade_requests} requests at {args.rate:g}/s ...", flush=True)
            result["cascade"] = bench_cascade(args, Path(tmp)) | {"conditions": cond}
            print(json.dumps(result["cascade"], indent=1, default=str), flush=True)
    result["conditions"] = cond
    result["targets"] = {"hangs": 0, "other": 0, "lost": 0, "records_missing_or_duplicated": 0}
    print(f"wrote {write_result('faults', result)}")


if __name__ == "__main__":
    main()
