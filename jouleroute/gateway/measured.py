"""Measured joules of upstream answers: the GPU nodes' exporters, read by the gateway (docs/gateway.md).

One ``ExporterTracker`` per exporter and GPU set, however its GPUs are ordered (candidates served on the same GPUs
share one; two upstreams whose GPU sets on one exporter overlap without being equal are refused at start-up:
``gateway.config.shared_gpus`` says why). It reads
the counter every ``interval_s`` in a background task and splits each interval's joules over the answers
completed in it, by the tournament's rule (one generated token = 1, one prompt token = ``prefill_weight``).
An interval in which answers were in flight but none completed carries its joules to the next one; an
interval with nothing in flight is idle (its mean power is exported as the idle power, and its joules are
charged to no answer). Per candidate it keeps the measured joules and the profile's expectation for the
same answers, so /metrics shows their ratio: far from 1, the profile has gone stale.

An answer's own figure (headers, ``usage``) is needed before the interval it ends in is read, so it is a
projection: the answer's weighted tokens at the J per weighted token its candidate was last measured at on
this exporter, labelled ``projected:<the exporter's source>`` (``projected:measured-nvml``), never the bare
meter label: it is computed from a past interval, not read. The joules each interval settles on its answers
(/metrics) are the measurement, labelled ``measured-nvml``. Before the candidate's first measured interval,
after the exporter failed to answer (its rates are dropped; the next interval measured sets them again), or
while it cannot be read, the answer keeps the profile's expectation (``expected:<source>``), as without an
exporter.
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from jouleroute.energy.exporter import ExporterError, counter_delta_j, parse_counters
from jouleroute.gateway.config import shared_gpus
from jouleroute.pool import ServedEnergy

logger = logging.getLogger(__name__)


@dataclass
class _Done:
    candidate: str
    weight: float
    expected_j: float | None


class ExporterConnection:
    """GETs of one exporter on one kept-alive HTTP/1.1 connection (stdlib ``http.client``): the gateway scrapes
    every second for as long as it runs, and a scrape costs about a third of the CPU of an httpx request
    (benchmarks/bench_exporter_overhead.py). A dropped connection (an exporter restart) is opened again once."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ExporterError(f"{url}: not an http(s) URL")
        self.url, self.timeout_s = url, timeout_s
        self.host, self.port, self.https = parts.hostname, parts.port, parts.scheme == "https"
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.connection: http.client.HTTPConnection | None = None

    def _open(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.timeout_s)

    def get_text(self) -> str:
        for attempt in (1, 2):
            self.connection = self.connection or self._open()
            try:
                self.connection.request("GET", self.path)
                response = self.connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if attempt == 2:
                    raise ExporterError(f"{self.url}: {type(error).__name__}: {error}") from error
                continue
            if response.status != 200:
                raise ExporterError(f"{self.url}: answered HTTP {response.status}")
            return body.decode("utf-8", errors="replace")
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


@dataclass
class ExporterTracker:
    url: str
    gpus: list[int]
    metric: str
    timeout_s: float
    prefill_weight: float
    in_flight: int = 0
    done: list[_Done] = field(default_factory=list)
    carry_j: float = 0.0
    # per candidate: J per weighted token of the last interval measured with its answers in it (dropped when a
    # scrape fails: a rate is never carried over a gap in the readings)
    rate_j_per_token: dict[str, float] = field(default_factory=dict)
    idle_power_w: float | None = None
    up: bool = False
    source: str = "measured-nvml"
    last: tuple[float, dict[int, float]] | None = None
    measured_j: dict[str, float] = field(default_factory=dict)
    expected_j: dict[str, float] = field(default_factory=dict)  # the expectation for the answers measured
    lock: threading.Lock = field(default_factory=threading.Lock)
    connection: ExporterConnection | None = field(default=None, repr=False)

    def begin(self) -> None:
        with self.lock:
            self.in_flight += 1

    def abandon(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def finish(self, candidate: str, prompt: int, completion: int, expected_j: float | None) -> tuple[float, str] | None:
        """Count a completed answer into this interval; its projected figure at its candidate's last measured
        rate, or None."""
        weight = completion + self.prefill_weight * prompt
        with self.lock:
            self.in_flight -= 1
            if self.last is not None:
                self.done.append(_Done(candidate, weight, expected_j))
            rate = self.rate_j_per_token.get(candidate)
            if self.up and rate is not None:
                return rate * weight, f"projected:{self.source}"
        return None

    def read(self) -> tuple[dict[int, float], str]:
        """The counters of ``gpus`` (millijoules) and the exporter's energy label, in one kept-alive GET."""
        if self.connection is None:
            self.connection = ExporterConnection(self.url, self.timeout_s)
        text = self.connection.get_text()
        try:
            return parse_counters(text, self.metric, self.gpus)
        except ExporterError as error:
            raise ExporterError(f"{self.url}: {error}") from error

    def scrape(self) -> None:
        try:
            counters, source = self.read()
            now = time.perf_counter()
            delta = None if self.last is None else sum(counter_delta_j(self.last[1], counters, self.url).values())
        except ExporterError as error:
            if self.up or self.last is None:
                logger.warning("exporter %s not readable (%s): upstream answers carry the profile's expectation "
                               "until it answers again", self.url, error)
            with self.lock:
                self.up, self.last, self.carry_j = False, None, 0.0
                self.done, self.rate_j_per_token = [], {}
            return
        with self.lock:
            if delta is not None:
                self._attribute(delta, now - self.last[0])
            self.up, self.source, self.last = True, source, (now, counters)

    def _attribute(self, delta_j: float, elapsed_s: float) -> None:
        if self.done:
            joules = self.carry_j + delta_j
            total = sum(d.weight for d in self.done)
            for d in self.done:
                share = joules * (d.weight / total if total > 0 else 1.0 / len(self.done))
                self.measured_j[d.candidate] = self.measured_j.get(d.candidate, 0.0) + share
                if d.expected_j is not None:
                    self.expected_j[d.candidate] = self.expected_j.get(d.candidate, 0.0) + d.expected_j
            if total > 0:  # the token rule gives every answer of the interval the same J per weighted token
                self.rate_j_per_token.update(dict.fromkeys({d.candidate for d in self.done}, joules / total))
            self.done, self.carry_j = [], 0.0
        elif self.in_flight > 0:
            self.carry_j += delta_j
        elif elapsed_s > 0:
            self.idle_power_w, self.carry_j = delta_j / elapsed_s, 0.0


class MeasuredEnergy:
    """Every exporter the gateway reads, their scraping task, and their /metrics families."""

    def __init__(self, prefill_weight: float, interval_s: float = 1.0) -> None:
        self.prefill_weight, self.interval_s = prefill_weight, interval_s
        self.trackers: dict[tuple[str, frozenset[int]], ExporterTracker] = {}
        self.readers: dict[tuple[str, frozenset[int]], str] = {}  # the upstream that first named each tracker
        self.task: asyncio.Task | None = None

    def tracker(self, energy: ServedEnergy | None, upstream: str | None = None) -> ExporterTracker | None:
        """The tracker of ``energy``'s exporter and GPU set (one per set, whatever the order its GPUs are named
        in). ``upstream`` names the caller in the error raised when its GPUs overlap another upstream's on the
        same exporter without being the same set (``gateway.config.shared_gpus``)."""
        if energy is None or energy.exporter_url is None:
            return None
        url, gpus = energy.exporter_url.rstrip("/"), frozenset(energy.gpus or ())  # one exporter, a slash aside
        key = (url, gpus)
        if key not in self.trackers:
            for (other_url, other), reader in self.readers.items():
                problem = other_url == url and shared_gpus(url, reader, other, upstream or "another upstream", gpus)
                if problem:
                    raise ValueError(f"gateway: {problem}")
            self.trackers[key] = ExporterTracker(url, sorted(gpus), energy.metric, energy.scrape_timeout_s,
                                                 self.prefill_weight)
            self.readers[key] = upstream or "an upstream"
        return self.trackers[key]

    def start(self) -> None:
        """Start scraping on the running event loop (the gateway's), once."""
        if self.trackers and (self.task is None or self.task.done()):
            self.task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        try:
            while True:
                for tracker in list(self.trackers.values()):
                    await asyncio.to_thread(tracker.scrape)
                await asyncio.sleep(self.interval_s)
        finally:
            for tracker in self.trackers.values():
                if tracker.connection is not None:
                    tracker.connection.close()

    async def aclose(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    def collect(self):
        """prometheus-client collector: measured joules, measured/expected, exporter up and idle power."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        joules = CounterMetricFamily("jouleroute_gateway_measured_energy_joules",
                                     "Upstream answers' joules read on their GPU nodes' exporters",
                                     labels=["candidate", "energy_source"])
        ratio = GaugeMetricFamily("jouleroute_gateway_measured_expected_ratio",
                                  "Measured joules / the profile's expectation for the same answers (1: the "
                                  "profile still holds)", labels=["candidate"])
        up = GaugeMetricFamily("jouleroute_gateway_exporter_up", "1 when the exporter answered its last scrape",
                               labels=["exporter"])
        idle = GaugeMetricFamily("jouleroute_gateway_exporter_idle_power_watts",
                                 "Mean power of the exporter's GPUs over the last interval with nothing in flight",
                                 labels=["exporter"])
        for (url, _), t in self.trackers.items():
            name = f"{url} gpu={','.join(map(str, t.gpus))}"
            with t.lock:
                up.add_metric([name], 1.0 if t.up else 0.0)
                if t.idle_power_w is not None:
                    idle.add_metric([name], t.idle_power_w)
                for candidate, value in t.measured_j.items():
                    joules.add_metric([candidate, t.source], value)
                    if t.expected_j.get(candidate):
                        ratio.add_metric([candidate], value / t.expected_j[candidate])
        yield from (joules, ratio, up, idle)
