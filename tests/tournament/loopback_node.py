"""A GPU node on loopback: OpenAI-compatible servers and a DCGM-format exporter, over real HTTP.

There is no GPU here, so the node's GPUs are simulated counters: each draws ``idle_w`` always, plus
``busy_w`` for every request in flight on it, published in millijoules the way dcgm-exporter publishes
NVML's counter. Everything above the counters is real: the servers are HTTP servers in threads of the test
process, and jouleroute's OpenAI client and exporter meter talk to them over sockets as to a vLLM node.

A server answers every chat request with the same short reply and ``usage``. Its work is either GPU time
(``gpu_s``: the request keeps its GPUs busy that long) or CPU time (``cpu_s``: burnt in the handler's thread,
which a CPU-time estimate of this process sees).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
REPLY = {"choices": [{"message": {"content": "Answer: 42"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


class SimulatedNode:
    def __init__(self, gpus: int = 2, idle_w: float = 50.0, busy_w: float = 100.0) -> None:
        self.idle_w, self.busy_w = idle_w, busy_w
        self.lock = threading.Lock()
        self.counter_mj = [1e6] * gpus
        self.in_flight: list[dict[str, int]] = [{} for _ in range(gpus)]  # gpu -> {server: requests}
        self.busy_j = 0.0  # joules drawn above idle, all GPUs
        self.overlaps = 0  # requests that began while another server's request ran on one of their GPUs
        self.servers: list[ThreadingHTTPServer] = []
        self.last = time.perf_counter()

    def _advance(self) -> None:
        now = time.perf_counter()
        for gpu, servers in enumerate(self.in_flight):
            busy = self.busy_w * sum(servers.values()) * (now - self.last)
            self.counter_mj[gpu] += (self.idle_w * (now - self.last) + busy) * 1000
            self.busy_j += busy
        self.last = now

    def busy(self, server: str, gpus: list[int], delta: int) -> None:
        with self.lock:
            self._advance()
            for gpu in gpus:
                others = sum(n for s, n in self.in_flight[gpu].items() if s != server)
                self.overlaps += int(delta > 0 and others > 0)
                self.in_flight[gpu][server] = self.in_flight[gpu].get(server, 0) + delta

    def metrics(self) -> str:
        with self.lock:
            self._advance()
            lines = [f"# TYPE {METRIC} counter"]
            lines += [f'{METRIC}{{gpu="{gpu}"}} {mj:.0f}' for gpu, mj in enumerate(self.counter_mj)]
            return "\n".join(lines) + "\n"

    def exporter(self) -> str:
        """Start the node's exporter; its /metrics URL."""
        node = self

        class Exporter(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                _send(self, node.metrics().encode(), "text/plain; version=0.0.4")

            def log_message(self, *args) -> None:
                pass

        return f"{self._start(Exporter)}/metrics"

    def server(self, gpus: list[int], gpu_s: float = 0.0, cpu_s: float = 0.0) -> str:
        """Start an OpenAI-compatible server on ``gpus`` of this node; its /v1 URL."""
        node, name = self, f"server{len(self.servers)}"

        class Server(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                node.busy(name, gpus, +1)
                try:
                    time.sleep(gpu_s)
                    burn(cpu_s)
                finally:
                    node.busy(name, gpus, -1)
                _send(self, json.dumps(REPLY).encode(), "application/json")

            def log_message(self, *args) -> None:
                pass

        return f"{self._start(Server)}/v1"

    def _start(self, handler) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def burn(cpu_s: float) -> None:
    """Spend ``cpu_s`` of this thread's CPU time."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


def _send(handler: BaseHTTPRequestHandler, body: bytes, content_type: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def served_inputs(tmp_path, pool, energy, queries: int = 4):
    """The tournament's inputs for ``pool`` (served candidates, ``backend.kind`` openai) over ``queries``
    open prompts; a candidate with ``energy`` gets a modelled rate for when its exporter stops answering."""
    import pandas as pd

    from jouleroute.backends import BackendConfig
    from jouleroute.pool import ModelSpec
    from jouleroute.tournament import TournamentConfig, TournamentInputs
    from jouleroute.tournament.served import ModelledRate

    rows = pd.DataFrame({"query_id": [f"user/{i}" for i in range(queries)], "task": "user", "split": "test",
                         "question": "What is 6 times 7?", "subtask": "", "choices_json": "[]", "gold": None})
    return TournamentInputs(
        queries=rows, pool=pool, models={c.model: ModelSpec(source="served", served_name=c.model) for c in pool},
        backend=BackendConfig(kind="openai", concurrency=1, max_retries=0, stream=False), energy=energy,
        config=TournamentConfig(warmup_batches=0), models_dir=tmp_path / "models", shards_dir=tmp_path / "shards",
        profile_path=tmp_path / "profile.parquet", data_dir=tmp_path,
        modelled={c.candidate_id: ModelledRate(0.1, 0.01, "user figures", "test") for c in pool if c.energy})
