"""Stubs at the NVML boundary, for `jouleroute meter --counter tests.served.stub_counter:TokenCounter`.

There is no GPU here, so the counter a GPU would advance is simulated from the work its server does: it
reads the bundled server's token counter (``/metrics``, jouleroute_serve_generation_tokens_total) at every
scrape and returns ``idle_w x seconds since start + j_per_token x tokens generated``, in millijoules, as
NVML's total-energy counter would. Everything else (the exporter process, its Prometheus text, the scrape,
the parser, the attribution) is the real code. ``RisingCounter`` is the simplest stand-in, for the tests and
benchmarks that serve a `jouleroute meter` in-process: every read rises by a fixed step on every GPU.
"""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families


class TokenCounter:
    source = "measured-nvml"

    def __init__(self, server: str, j_per_token: str, idle_w: str = "0") -> None:
        self.server, self.j_per_token, self.idle_w = server, float(j_per_token), float(idle_w)
        self.started = time.monotonic()

    def tokens(self) -> float:
        text = httpx.get(self.server, timeout=5).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "jouleroute_serve_generation_tokens_total":
                    return sample.value
        raise RuntimeError(f"{self.server} lists no generation token counter")

    def read_mj(self) -> dict[int, float]:
        joules = self.idle_w * (time.monotonic() - self.started) + self.j_per_token * self.tokens()
        return {0: joules * 1000.0}


class RisingCounter:
    """NVML's total-energy counter on ``gpus`` GPUs, rising ``step_mj`` millijoules at every read."""

    source = "measured-nvml"

    def __init__(self, step_mj: float = 500.0, gpus: int = 2) -> None:
        self.step_mj, self.gpus, self.mj = float(step_mj), int(gpus), 0.0

    def read_mj(self) -> dict[int, float]:
        self.mj += self.step_mj
        return {gpu: self.mj for gpu in range(self.gpus)}
