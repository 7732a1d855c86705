"""Exporter energy: DCGM's text and `jouleroute meter`'s, read with prometheus-client's parser.

`jouleroute meter` is served here on loopback with an in-process counter that stands in for NVML
(no GPU here): a stub at the NVML boundary, as the served-pool tests do in their own processes.
"""

from __future__ import annotations

import pytest

from jouleroute.energy.exporter import ExporterError, ExporterMeter, counter_delta_j, parse_counters, read_exporter
from jouleroute.pool import DCGM_ENERGY_METRIC

DCGM_TEXT = """# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="n1"} 123456789
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="n1"} 5000
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0"} 97
"""


class FakeNvml:
    """Stands in for NVML's total-energy counter (millijoules), advanced by the test."""

    source = "measured-nvml"

    def __init__(self) -> None:
        self.mj = {0: 1_000.0, 1: 2_000.0}

    def read_mj(self) -> dict[int, float]:
        return dict(self.mj)


def test_dcgm_text_gives_millijoules_per_gpu_and_names_a_missing_gpu():
    counters, source = parse_counters(DCGM_TEXT, DCGM_ENERGY_METRIC, [1, 0])
    assert counters == {1: 5000.0, 0: 123456789.0} and source == "measured-nvml"
    with pytest.raises(ExporterError, match=r"no DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION for gpu \[3\]"):
        parse_counters(DCGM_TEXT, DCGM_ENERGY_METRIC, [0, 3])


def test_a_counter_that_goes_backwards_is_refused():
    assert counter_delta_j({0: 1000.0}, {0: 3500.0}, "u") == {0: 2.5}
    with pytest.raises(ExporterError, match="went backwards"):
        counter_delta_j({0: 1000.0}, {0: 10.0}, "u")


def test_jouleroute_meter_serves_dcgm_format_and_a_window_reads_its_rise():
    from jouleroute.energy.meter_server import serve_meter

    nvml = FakeNvml()
    server, _ = serve_meter(nvml, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        counters, source = read_exporter(url, DCGM_ENERGY_METRIC, None)
        assert counters == {0: 1000.0, 1: 2000.0} and source == "measured-nvml"
        meter = ExporterMeter(url, [1])
        with meter.window() as box:
            nvml.mj = {0: 9_000.0, 1: 2_750.0}  # gpu 0 is another candidate's: not counted
        assert box[0].energy_j == pytest.approx(0.75) and box[0].per_device_j == {"gpu1": pytest.approx(0.75)}
        assert box[0].source == "measured-nvml" and meter.device_info()["exporter_url"] == url
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ExporterError, match="ConnectError"):
        meter.begin()
