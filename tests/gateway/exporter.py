"""A DCGM-style exporter on loopback whose counters the test sets: the GPU node's side of gateway/measured.py.

It serves ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="..."}`` in millijoules, as dcgm-exporter does, over real
HTTP; ``add`` raises the counters by the joules a test says were drawn, and ``up = False`` makes it answer 503
(an exporter restarting) until it is set back.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


class ScriptedExporter:
    def __init__(self, gpus: int = 2, start_mj: float = 1e6) -> None:
        self.mj = {gpu: start_mj for gpu in range(gpus)}
        self.up = True
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept alive, as the gateway's scrapes expect

            def do_GET(self) -> None:
                with exporter.lock:
                    up = exporter.up
                    lines = [f"# TYPE {METRIC} counter",
                             *(f'{METRIC}{{gpu="{g}"}} {mj}' for g, mj in exporter.mj.items())]
                body = ("\n".join(lines) + "\n").encode() if up else b"restarting\n"
                self.send_response(200 if up else 503)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, joules: dict[int, float]) -> None:
        """The GPUs drew ``joules`` (per GPU) since the last change."""
        with self.lock:
            for gpu, j in joules.items():
                self.mj[gpu] += j * 1000.0

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
