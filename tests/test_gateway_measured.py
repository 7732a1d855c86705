"""The gateway's interval attribution (gateway/measured.py) on hand-made counter rises: the rule, not the HTTP
(tests/served/test_served_gateway.py reads real exporter processes)."""

from __future__ import annotations

import pytest


def tracker():
    from jouleroute.gateway.measured import ExporterTracker

    t = ExporterTracker("http://127.0.0.1:9/metrics", [0], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1.0, 0.1)
    t.last, t.up = (0.0, {0: 0.0}), True  # as after the first scrape
    return t


def test_an_interval_goes_to_its_answers_by_tokens_and_sets_the_rate():
    t = tracker()
    for cand, prompt, completion in (("a", 10, 9), ("b", 0, 30)):
        t.begin()
        assert t.finish(cand, prompt, completion, expected_j=5.0) is None  # no interval read yet: no figure
    t._attribute(40.0, 1.0)
    assert t.measured_j == {"a": pytest.approx(10.0), "b": pytest.approx(30.0)}
    assert t.expected_j == {"a": 5.0, "b": 5.0} and t.rate_j_per_token == {"a": 1.0, "b": 1.0}
    t.begin()
    # the last rate: a projection of the measured meter, not a reading
    assert t.finish("a", 0, 7, None) == (pytest.approx(7.0), "projected:measured-nvml")
    t.begin()
    assert t.finish("c", 0, 7, None) is None  # a candidate never measured gets no other candidate's rate


def test_in_flight_intervals_carry_over_and_empty_ones_are_idle():
    t = tracker()
    t.begin()
    t._attribute(12.0, 1.0)  # in flight, nothing completed: carried
    assert t.measured_j == {} and t.carry_j == 12.0
    t.finish("a", 0, 10, None)
    t._attribute(8.0, 1.0)
    assert t.measured_j == {"a": pytest.approx(20.0)} and t.carry_j == 0.0
    t._attribute(3.0, 2.0)  # nothing in flight: idle
    assert t.idle_power_w == pytest.approx(1.5) and t.measured_j == {"a": pytest.approx(20.0)}


def test_an_unreadable_exporter_drops_to_the_expectation():
    t = tracker()
    t.rate_j_per_token = {"a": 1.0}
    t.scrape()  # nothing listens on port 9
    assert not t.up and t.last is None and t.rate_j_per_token == {}
    t.begin()
    assert t.finish("a", 0, 5, 2.0) is None


def test_the_gateway_reads_a_real_exporter_on_one_kept_alive_connection_and_reconnects_after_a_restart():
    """A `jouleroute meter` on loopback (NVML stubbed at its boundary): successive scrapes share one connection,
    an exporter that goes away drops the tracker to the expectation, and the same port serving again is read
    again on a fresh connection."""
    from jouleroute.energy.meter_server import serve_meter
    from jouleroute.gateway.measured import ExporterTracker
    from tests.served.stub_counter import RisingCounter

    server, _ = serve_meter(RisingCounter(500.0, gpus=2), "127.0.0.1", 0)
    port = server.server_port
    t = ExporterTracker(f"http://127.0.0.1:{port}/metrics", [0, 1], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 2.0, 0.1)
    t.scrape()
    first = t.connection.connection
    t.begin()
    t.finish("a", 0, 10, None)
    t.scrape()
    assert t.up and t.connection.connection is first  # kept alive
    assert t.measured_j["a"] > 0 and t.source == "measured-nvml"
    server.shutdown()
    server.server_close()
    t.scrape()
    assert not t.up and t.last is None
    again, _ = serve_meter(RisingCounter(500.0, gpus=2), "127.0.0.1", port)
    try:
        t.scrape()
        assert t.up and t.last is not None and t.connection.connection is not first
    finally:
        again.shutdown()
        again.server_close()


def test_one_exporter_named_with_and_without_a_trailing_slash_is_one_tracker():
    """The tournament's lanes compare exporter URLs a trailing slash aside; so does the gateway's tracker key."""
    from jouleroute.gateway.measured import MeasuredEnergy
    from jouleroute.pool import ServedEnergy

    measured = MeasuredEnergy(1.0, 1.0)
    plain = ServedEnergy(exporter_url="http://gpu1:9400/metrics", gpus=[0], j_per_output_token=0.1)
    slashed = ServedEnergy(exporter_url="http://gpu1:9400/metrics/", gpus=[0], j_per_output_token=0.1)
    assert measured.tracker(plain, "a") is measured.tracker(slashed, "b") and len(measured.trackers) == 1
