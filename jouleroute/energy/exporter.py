"""Energy read from a GPU node's Prometheus exporter: NVIDIA's DCGM exporter, or ``jouleroute meter``.

The exporter publishes a cumulative energy counter per GPU, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` in
millijoules, labelled ``gpu``. A window's energy is the counter's rise over the window, summed over the
candidate's GPUs. The text is parsed with prometheus-client's parser, never by hand. The label is what the
exporter states in ``jouleroute_meter_info{source=...}`` (``jouleroute meter`` does), else ``measured-nvml``:
DCGM's counter is NVML's.

Every failure to read (unreachable, no such GPU, a counter that went backwards because the exporter or the
driver restarted) raises ``ExporterError``, so a caller can fall back to modelled energy and say why.

A scrape returns the exporter's cached sample, refreshed every collect interval (dcgm-exporter's default:
30 s). A powered GPU's counter always rises, so a counter that held still over a window, or a window shorter
than the longest span a counter was seen to hold still, means the window's figure is quantization noise. That
is warned about once per exporter; the figures are kept as read.
"""

from __future__ import annotations

import logging
import time

import httpx

from jouleroute.energy.base import Measurement, Meter

METER_INFO_METRIC = "jouleroute_meter_info"  # info metric of `jouleroute meter`: labels source, counter
DEFAULT_SOURCE = "measured-nvml"

logger = logging.getLogger(__name__)
_WARNED_URLS: set[str] = set()  # exporters already warned about as too coarse: one warning each per process


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


HEALTHY_STEP_S = 0.1  # a counter refreshed this often (dcgm-exporter -c 100) resolves a batch's window

class ExporterMeter(Meter):
    """One candidate's GPUs on one exporter, read at the start and at the end of each window."""

    def __init__(self, url: str, gpus: list[int], metric: str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                 timeout_s: float = 2.0) -> None:
        self.url, self.gpus, self.metric, self.timeout_s = url, list(gpus), metric, timeout_s
        self._client = httpx.Client()
        self.update_period_s = 0.0  # the longest span a counter was seen to hold still: the exporter is no faster
        self.coarse_windows = 0  # windows the exporter's update period could not resolve
        self._held: dict[int, tuple[float, float]] = {}  # gpu -> (counter mJ, when that value was first read)
        _, self.source = self._read()  # fails at once when the exporter is not there

    def _read(self) -> tuple[dict[int, float], str]:
        counters, source = read_exporter(self.url, self.metric, self.gpus, self.timeout_s, self._client)
        now = time.perf_counter()
        for gpu, mj in counters.items():
            value, since = self._held.get(gpu, (None, now))
            if value == mj:
                self.update_period_s = max(self.update_period_s, now - since)
            else:
                self._held[gpu] = (mj, now)
        return counters, source

    def begin(self) -> tuple[float, dict[int, float]]:
        counters, _ = self._read()
        return time.perf_counter(), counters

    def end(self, token: object) -> Measurement:
        started, before = token  # type: ignore[misc]
        after, _ = self._read()
        elapsed = time.perf_counter() - started
        delta = counter_delta_j(before, after, self.url)
        self._check_resolution(elapsed, delta)
        return Measurement(elapsed, sum(delta.values()), self.source, {f"gpu{g}": j for g, j in delta.items()})

    def _check_resolution(self, elapsed_s: float, delta: dict[int, float]) -> None:
        """Flag a window the exporter cannot resolve: its counter held still longer than a healthy exporter's
        update steps (``HEALTHY_STEP_S``, dcgm-exporter at ``-c 100``), or the window is shorter than the span the
        counter was seen to hold still once that span is longer than those steps. A window within one healthy step
        (an ``idle_seconds: 0`` idle read) tells nothing either way."""
        if elapsed_s > 2 * HEALTHY_STEP_S and any(j == 0 for j in delta.values()):
            why = f"its counter did not move over a {elapsed_s:.2f} s window"
        elif self.update_period_s > 2 * HEALTHY_STEP_S and elapsed_s < self.update_period_s:
            why = f"a {elapsed_s:.2f} s window is shorter than the {self.update_period_s:.2f} s its counter held still"
        else:
            return
        self.coarse_windows += 1
        log = logger.debug if self.url in _WARNED_URLS else logger.warning
        _WARNED_URLS.add(self.url)
        log("exporter %s updates too rarely: %s, so per-batch and idle energy read there are quantization noise "
            "(kept as read). Run dcgm-exporter with a short collect interval (`-c 100`, milliseconds) or "
            "`jouleroute meter` on that node, and batch more work per window. (%d such windows so far)",
            self.url, why, self.coarse_windows)

    def measure_idle_power_w(self, seconds: float) -> float:
        token = self.begin()
        time.sleep(seconds)
        return self.end(token).avg_power_w

    def device_info(self) -> dict[str, object]:
        return {"meter": "exporter", "exporter_url": self.url, "gpus": self.gpus, "metric": self.metric,
                "source": self.source}

    def close(self) -> None:
        self._client.close()
