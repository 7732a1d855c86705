"""CPU the gateway spends reading exporters, against its CPU at 20 requests/s (target: <= 1%).

A `jouleroute meter` serves a counter on loopback (an in-process stand-in for NVML: no GPU here); the
gateway's own ``ExporterTracker.scrape`` reads it (HTTP GET + prometheus-client's parser + attribution)
``--scrapes`` times, and the CPU time of the scraping thread per scrape is measured (the meter serves
from another thread of this process, not counted). The gateway reads each exporter
once per ``energy_scrape_s`` (1 s), so its cost per second is independent of the request rate; the
gateway's own CPU per request is taken from ``results/gateway_load.json`` (bench_gateway.py) for the kNN
and LM routers. The exporter's own serving CPU is on the GPU node, not counted here. Writes
``results/exporter_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS, conditions, write_result  # noqa: E402
from tests.served.stub_counter import RisingCounter  # noqa: E402  (NVML's counter: no GPU here)


def main() -> None:

    from jouleroute.energy.meter_server import serve_meter
    from jouleroute.gateway.measured import ExporterTracker

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second the gateway serves")
    args = parser.parse_args()
    server, _ = serve_meter(RisingCounter(1000.0, gpus=8), "127.0.0.1", 0)  # an 8-GPU node
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    tracker = ExporterTracker(url, [0, 1], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 2.0, 0.1)
    tracker.scrape()  # connection and imports warm
    cpu0, wall0 = time.thread_time(), time.perf_counter()  # this thread only: the meter serves in another
    for _ in range(args.scrapes):
        tracker.begin()
        tracker.finish("c", 100, 50, None)
        tracker.scrape()
    cpu_s, wall_s = time.thread_time() - cpu0, time.perf_counter() - wall0
    assert tracker.up, "the exporter stopped answering during the measurement"
    server.shutdown()
    server.server_close()
    per_scrape_ms = 1000 * cpu_s / args.scrapes
    load = json.loads((RESULTS / "gateway_load.json").read_text())
    shares = {}
    for router, figures in load["routers"].items():
        if isinstance(figures, dict) and "gateway_cpu_ms_per_request" in figures:
            gateway_ms_per_s = figures["gateway_cpu_ms_per_request"] * args.rate
            shares[router] = {"gateway_cpu_ms_per_s": round(gateway_ms_per_s, 2),
                              "exporter_share": round(per_scrape_ms / gateway_ms_per_s, 4)}
    payload = {"scrapes": args.scrapes, "cpu_ms_per_scrape": round(per_scrape_ms, 3),
               "wall_ms_per_scrape": round(1000 * wall_s / args.scrapes, 3), "scrapes_per_s": 1.0,
               "rate_rps": args.rate, "vs_gateway": shares, "target_share": 0.01,
               "conditions": conditions()}
    path = write_result("exporter_overhead", payload)
    print(json.dumps(payload, indent=2), f"\n-> {path}")


if __name__ == "__main__":
    main()
