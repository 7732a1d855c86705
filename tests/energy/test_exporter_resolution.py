"""An exporter that refreshes its counter rarely (dcgm-exporter's default collect interval is 30 s) is warned about.

The exporter is `jouleroute meter` served on loopback. Its counter source stands in for NVML, as in
test_exporter.py (no GPU here): ``CachedSample`` holds its value until the test refreshes it, the way
dcgm-exporter serves its cached sample between collections; ``LiveCounter`` moves on every scrape.
"""

from __future__ import annotations

import logging
import time

import pytest

from jouleroute.energy.exporter import ExporterMeter
from jouleroute.energy.meter_server import serve_meter


class CachedSample:
    source = "measured-nvml"

    def __init__(self) -> None:
        self.mj = 5_000_000.0

    def read_mj(self) -> dict[int, float]:
        return {0: self.mj}


class LiveCounter(CachedSample):
    def read_mj(self) -> dict[int, float]:
        self.mj += 6_000.0  # 60 W idle, read 0.1 s apart at the least
        return {0: self.mj}


@pytest.fixture
def exporter():
    """``start(counter) -> url`` of `jouleroute meter` serving ``counter``; stopped after the test."""
    servers = []

    def start(counter) -> str:
        server, _ = serve_meter(counter, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/metrics"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "updates too rarely" in r.getMessage()]


def test_a_counter_that_holds_still_over_a_window_is_warned_about_once(exporter, caplog):
    caplog.set_level(logging.DEBUG, logger="jouleroute.energy.exporter")
    url = exporter(CachedSample())
    meter = ExporterMeter(url, [0])
    assert meter.measure_idle_power_w(0.25) == 0.0  # the figure is kept as read, not invented
    with meter.window() as box:
        time.sleep(0.01)
    assert box[0].energy_j == 0.0 and meter.coarse_windows == 2
    [warning] = _warnings(caplog)
    assert url in warning and "did not move" in warning
    assert "`-c 100`, milliseconds" in warning and "`jouleroute meter`" in warning


def test_a_window_shorter_than_the_counter_was_seen_to_hold_still_is_warned_about(exporter, caplog):
    counter = CachedSample()
    url = exporter(counter)
    meter = ExporterMeter(url, [0])
    with meter.window() as box:
        time.sleep(0.05)  # longer than the reads so far saw the sample held (the first two, back to back)
        counter.mj += 2_000.0
    assert box[0].energy_j == pytest.approx(2.0) and not _warnings(caplog)
    time.sleep(0.3)  # no collection meanwhile: the next read sees the same sample, 0.3 s on
    with meter.window() as box:
        counter.mj += 9_000.0  # the collection lands inside this short window
    assert box[0].energy_j == pytest.approx(9.0)  # kept as read
    [warning] = _warnings(caplog)
    assert meter.update_period_s >= 0.3 and url in warning and "shorter than" in warning


def test_a_counter_that_moves_on_every_scrape_is_not_warned_about(exporter, caplog):
    url = exporter(LiveCounter())
    meter = ExporterMeter(url, [0])
    meter.measure_idle_power_w(0.05)
    for _ in range(3):
        with meter.window():
            time.sleep(0.01)
    assert meter.coarse_windows == 0 and meter.update_period_s == 0.0 and not _warnings(caplog)


def test_a_window_within_one_healthy_step_is_not_warned_about(exporter, caplog):
    """`idle_seconds: 0` reads the counter twice back to back: it cannot have moved, and that says nothing."""
    counter = CachedSample()
    meter = ExporterMeter(exporter(counter), [0])
    meter.measure_idle_power_w(0.0)
    with meter.window():
        counter.mj += 3_000.0
    assert meter.coarse_windows == 0 and not _warnings(caplog)
