"""A schema-driven fuzz of the gateway's API: schemathesis reads the gateway's own OpenAPI document and sends
the cases it generates to a real gateway on loopback; every case must be answered, never with a 5xx.

Two upstream processes run jouleroute's own OpenAI-compatible server (jouleroute/backends/serve.py) over a
scripted backend (tests/gateway/scripted.py: it answers any prompt at once, so no model is loaded); a gateway
process stands in front, in each of the two modes that answer ``jouleroute-auto`` (the kNN router on
bench_gateway.py's synthetic profile; a one-stage cascade of both upstreams), with an API key required and the
default limits except the rate limits, which a fuzz would otherwise spend its cases on. The gateway's
``/openapi.json`` (request bodies from ``jouleroute.gateway.protocol.request_schema``) is loaded with
``schemathesis.openapi.from_url``; for each operation, ``--examples`` cases that follow the schema
(``positive``) and ``--examples`` that break it (``negative``: wrong types, missing fields, out-of-range
numbers, bad headers) are drawn by Hypothesis with a fixed seed and sent with the key. Recorded: cases sent per
operation and mode, the status counts, every case not answered (a transport error or a timeout) and every 5xx,
each with a curl command that replays it.

Target (issue 50): >= 1,000 cases, every one answered, 0 server errors. Writes results/fuzz.json.

    .venv/bin/python benchmarks/bench_fuzz.py [--examples 150] [--seed 50] [--gateway router cascade]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

API_KEY = "fuzz-key-0123456789"
CANDIDATES = ("small", "large")


def run_upstream(name: str, port: int) -> None:
    import uvicorn

    from jouleroute.backends.serve import create_app
    from tests.gateway.scripted import ScriptedBackend

    backend = ScriptedBackend(f"scripted-{name}", {"plus": "The answer is 7."}, default="The answer is 42.")
    uvicorn.run(create_app(backend, f"tiny-{name}", default_max_tokens=16), host="127.0.0.1", port=port,
                log_level="warning", access_log=False)


def run_gateway(targets: dict[str, str], port: int, mode: str) -> None:
    """``router``: the kNN router; ``cascade``: the chain [[small, large]] (both answer "42": the stage agrees)."""
    import uvicorn

    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.auth import KeyStore, key_hash
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream

    upstreams = {c: RemoteUpstream(c, url, f"tiny-{c}", ExpectedEnergy({}, 0.1), timeout_s=20)
                 for c, url in targets.items()}
    limits = {"rate_per_minute": 1e9, "burst": 10**6}
    keys = KeyStore({key_hash(API_KEY)})
    if mode == "cascade":
        from jouleroute.cascade.chain import Chain
        from jouleroute.gateway.cascade import CascadeGateway

        cfg = GatewayConfig.model_validate({"router": {"kind": "cascade", "chain": "fuzz"},
                                            "auth": {"keys_env": None}, "limits": limits})
        gateway = CascadeGateway(cfg, Chain((tuple(CANDIDATES),)), upstreams, keys)
    else:
        from bench_gateway import build_router
        from jouleroute.gateway.service import Gateway

        cfg = GatewayConfig.model_validate({"auth": {"keys_env": None}, "limits": limits})
        gateway = Gateway(cfg, build_router("knn", Path(".")), upstreams, keys)
    uvicorn.run(create_app(gateway), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})


def fuzz(base: str, examples: int, seed: int) -> dict:
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    session = requests.Session()
    auth = {"Authorization": f"Bearer {API_KEY}"}
    sent: dict[str, Counter] = defaultdict(Counter)  # "METHOD path mode" -> status counts
    failures: list[dict] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    def run(op, mode) -> None:
        label = f"{op.method.upper()} {op.path} {mode.value}"

        @fixed_seed(seed)
        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(case=op.as_strategy(generation_mode=mode))
        def one(case) -> None:
            try:
                response = case.call(base_url=base, session=session, headers=auth, timeout=60)
                status = response.status_code
            except Exception as error:  # noqa: BLE001 - not answered: recorded, the fuzz goes on
                status = f"unanswered: {type(error).__name__}"
            sent[label][str(status)] += 1
            if mode == GenerationMode.POSITIVE and isinstance(status, int) and 400 <= status < 500:
                refused[f"{status}: {_message(response.text)}"] += 1  # a case the schema allows, refused: why
            if not isinstance(status, int) or status >= 500:
                failures.append({"case": label, "status": status, "curl": case.as_curl_command(headers=auth),
                                 "body": response.text[:300] if isinstance(status, int) else ""})

        try:
            one()
        except Exception as error:  # noqa: BLE001 - a strategy that cannot draw (a GET with no parameters)
            skipped[label] = f"{type(error).__name__}: {str(error)[:200]}"
        print(f"  {label}: {sum(sent[label].values())} cases {dict(sent[label])}", flush=True)

    skipped: dict[str, str] = {}
    refused: Counter = Counter()
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run(op, mode)
    statuses = sum(sent.values(), Counter())
    cases = sum(statuses.values())
    server_errors = sum(n for s, n in statuses.items() if s.isdigit() and int(s) >= 500)
    unanswered = sum(n for s, n in statuses.items() if not s.isdigit())
    return {"cases": cases, "server_errors": server_errors, "unanswered": unanswered,
            "statuses": dict(sorted(statuses.items())), "by_operation": {k: dict(v) for k, v in sent.items()},
            "operations": [f"{op.method.upper()} {op.path}" for op in operations],
            "failures": failures[:20], "failures_total": len(failures), "not_generated": skipped,
            "positive_refused": dict(refused.most_common(12)),
            "met": cases >= 1000 and server_errors == 0 and unanswered == 0}


def _message(text: str) -> str:
    """An error answer's message, its numbers and quoted values blanked, so that like refusals count together."""
    import re

    try:
        message = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return text[:80]
    return re.sub(r"'[^']*'|-?\d[\d.e+-]*", "_", message)[:100]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=150, help="cases per operation and mode (at most)")
    parser.add_argument("--gateway", nargs="+", default=["router", "cascade"], choices=["router", "cascade"],
                        help="what answers jouleroute-auto: the kNN router, or a one-stage cascade")
    parser.add_argument("--seed", type=int, default=50)
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.name, args.port)
    if args.role == "gateway":
        return run_gateway(json.loads(args.targets), args.port, args.mode)

    import schemathesis

    from _common import conditions, write_result
    from bench_gateway import free_port, stop, wait_ready

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        targets, procs = {}, []
        for name in CANDIDATES:
            port = free_port()
            targets[name] = f"http://127.0.0.1:{port}/v1"
            procs.append(start(["--role", "upstream", "--name", name, "--port", str(port)], work / f"{name}.out"))
        try:
            for name, proc in zip(CANDIDATES, procs):
                wait_ready(targets[name] + "/models", proc)
            runs = {}
            for mode in args.gateway:
                gw_port = free_port()
                gateway = start(["--role", "gateway", "--targets", json.dumps(targets), "--port", str(gw_port),
                                 "--mode", mode], work / f"gateway-{mode}.out")
                try:
                    base = f"http://127.0.0.1:{gw_port}"
                    wait_ready(base + "/readyz", gateway)
                    print(f"[{mode} gateway]", flush=True)
                    started = time.perf_counter()
                    runs[mode] = fuzz(base, args.examples, args.seed)
                    runs[mode]["wall_s"] = round(time.perf_counter() - started, 1)
                    runs[mode]["gateway_alive_after"] = gateway.poll() is None
                finally:
                    stop(gateway)
                runs[mode]["gateway_log_tail"] = (work / f"gateway-{mode}.out").read_text()[-1500:]
        finally:
            for proc in procs:
                stop(proc)
    statuses = sum((Counter(r["statuses"]) for r in runs.values()), Counter())
    result = {"cases": sum(r["cases"] for r in runs.values()),
              "server_errors": sum(r["server_errors"] for r in runs.values()),
              "unanswered": sum(r["unanswered"] for r in runs.values()),
              "statuses": dict(sorted(statuses.items())), "wall_s": round(sum(r["wall_s"] for r in runs.values()), 1),
              "gateways": runs}
    result["met"] = result["cases"] >= 1000 and not result["server_errors"] and not result["unanswered"] and all(
        r["gateway_alive_after"] for r in runs.values())
    result |= {"examples_per_operation_and_mode": args.examples, "seed": args.seed,
               "schemathesis": schemathesis.__version__,
               "upstreams": "2 x jouleroute.backends.serve over a scripted backend (tests/gateway/scripted.py)",
               "gateway": "router: the kNN router (bench_gateway.py's synthetic profile); cascade: the chain "
                          "[[small, large]]; an API key, the default limits but the rate",
               "target": {"cases": ">= 1000", "server_errors": 0, "unanswered": 0}, "conditions": cond}
    print(json.dumps({k: v for k, v in result.items() if k not in ("conditions", "gateways")}, indent=1))
    print(f"wrote {write_result('fuzz', result)}")


if __name__ == "__main__":
    main()
