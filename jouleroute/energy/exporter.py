"""Energy read from a GPU node's Prometheus exporter: NVIDIA's DCGM exporter, or ``jouleroute meter``.

The exporter publishes a cumulative energy counter per GPU, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in
millijoules, labelled ``gpu``. A window's energy is the counter's rise over the window, summed over the
candidate's GPUs. The text is parsed with prometheus-client's parser, never by hand. The label is what the
exporter states in ``jouleroute_meter_info{source=...}`` (``jouleroute meter`` does), else ``measured-nvml``:
DCGM's counter is NVML's.

Every failure to read (unreachable, no such GPU, a counter that went backwards because the exporter or the
driver restarted) raises ``ExporterError``, so a caller can fall back to modelled energy and say why.
"""

from __future__ import annotations

import time

import httpx

from jouleroute.energy.base import Measurement, Meter

METER_INFO_METRIC = "jouleroute_meter_info"  # info metric of `jouleroute meter`: labels source, counter
DEFAULT_SOURCE = "measured-nvml"


class ExporterError(RuntimeError):
    """The exporter could not be read, or its counter cannot be trusted for this window."""


def parse_counters(text: str, metric: str, gpus: list[int] | None = None) -> tuple[dict[int, float], str]:
    """``({gpu: millijoules}, source)`` from Prometheus exposition text; ``gpus`` None: every GPU listed."""
    from prometheus_client.parser import text_string_to_metric_families

    counters: dict[int, float] = {}
    source = DEFAULT_SOURCE
    names = (metric, f"{metric}_total")  # a counter's samples may carry the _total suffix
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in names and "gpu" in sample.labels:
                    counters[int(sample.labels["gpu"])] = float(sample.value)
                elif sample.name in (METER_INFO_METRIC, f"{METER_INFO_METRIC}_info") and "source" in sample.labels:
                    source = sample.labels["source"]
    except ValueError as error:
        raise ExporterError(f"not Prometheus text: {error}") from error
    if gpus is not None:
        missing = [g for g in gpus if g not in counters]
        if missing:
            raise ExporterError(f"no {metric} for gpu {missing} (it lists gpu {sorted(counters)})")
        counters = {g: counters[g] for g in gpus}
    return counters, source


def read_exporter(url: str, metric: str, gpus: list[int] | None, timeout_s: float = 2.0,
                  client: httpx.Client | None = None) -> tuple[dict[int, float], str]:
    """Scrape ``url`` once: the counters of ``gpus`` (millijoules) and the exporter's energy label."""
    try:
        response = (client or httpx).get(url, timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise ExporterError(f"{url}: {type(error).__name__}: {error}") from error
    try:
        return parse_counters(response.text, metric, gpus)
    except ExporterError as error:
        raise ExporterError(f"{url}: {error}") from error


def counter_delta_j(before: dict[int, float], after: dict[int, float], url: str) -> dict[int, float]:
    """Joules per GPU between two readings; a counter that went backwards (a restart) is an error."""
    delta = {g: (after[g] - before[g]) / 1000.0 for g in before}
    fallen = [g for g, d in delta.items() if d < 0]
    if fallen:
        raise ExporterError(f"{url}: the counter of gpu {fallen} went backwards (exporter or driver restarted)")
    return delta


class ExporterMeter(Meter):
    """One candidate's GPUs on one exporter, read at the start and at the end of each window."""

    def __init__(self, url: str, gpus: list[int], metric: str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                 timeout_s: float = 2.0) -> None:
        self.url, self.gpus, self.metric, self.timeout_s = url, list(gpus), metric, timeout_s
        self._client = httpx.Client()
        _, self.source = self._read()  # fails at once when the exporter is not there

    def _read(self) -> tuple[dict[int, float], str]:
        return read_exporter(self.url, self.metric, self.gpus, self.timeout_s, self._client)

    def begin(self) -> tuple[float, dict[int, float]]:
        counters, _ = self._read()
        return time.perf_counter(), counters

    def end(self, token: object) -> Measurement:
        started, before = token  # type: ignore[misc]
        after, _ = self._read()
        elapsed = time.perf_counter() - started
        delta = counter_delta_j(before, after, self.url)
        return Measurement(elapsed, sum(delta.values()), self.source, {f"gpu{g}": j for g, j in delta.items()})

    def measure_idle_power_w(self, seconds: float) -> float:
        token = self.begin()
        time.sleep(seconds)
        return self.end(token).avg_power_w

    def device_info(self) -> dict[str, object]:
        return {"meter": "exporter", "exporter_url": self.url, "gpus": self.gpus, "metric": self.metric,
                "source": self.source}

    def close(self) -> None:
        self._client.close()
