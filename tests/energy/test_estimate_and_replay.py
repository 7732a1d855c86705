"""The CPU-time estimate (run for real) and the replay meter."""

from __future__ import annotations

import json
import time

import pytest

from jouleroute.energy import EnergyConfig, EstimateMeter, Measurement, ReplayMeter, make_meter, nvml_usable, rapl_usable


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_estimate_is_cpu_seconds_times_watts_per_core():
    meter = EstimateMeter(cpu_watts_per_core=10.0)
    cpu0 = time.process_time()
    with meter.window() as box:
        _spin(0.2)
    cpu_s = time.process_time() - cpu0
    m = box[0]
    assert m.source == "estimated"
    # The window can only have seen the CPU time spent inside it: between 0.2 s and cpu_s.
    assert 10.0 * 0.2 <= m.energy_j <= 10.0 * cpu_s
    assert m.per_device_j == {"cpu-process": m.energy_j}
    assert m.time_s >= 0.2 * 0.5  # wall time is real (CPU time cannot exceed it by much on 1 thread)


def test_sleeping_draws_no_estimated_power():
    # The idle convention: the same estimate while nothing runs, i.e. about 0 W.
    idle_w = EstimateMeter(cpu_watts_per_core=10.0).measure_idle_power_w(0.2)
    assert 0.0 <= idle_w < 0.5


def test_estimate_rejects_non_positive_watts():
    with pytest.raises(ValueError, match="cpu_watts_per_core"):
        EstimateMeter(0.0)


def test_auto_on_this_machine_is_the_labelled_estimate(caplog):
    # This machine has no GPU and no RAPL; a GPU host gets Zeus instead.
    if nvml_usable() or rapl_usable():
        pytest.skip("this machine has a readable energy counter")
    meter = make_meter(EnergyConfig(meter="auto", cpu_watts_per_core=5.0))
    assert isinstance(meter, EstimateMeter)
    assert meter.cpu_watts_per_core == 5.0
    assert "ESTIMATES" in caplog.text


def test_replay_feeds_recorded_windows_back_with_its_label(tmp_path):
    recorded = {
        "source": "measured-nvml",
        "idle_power_w": 71.5,
        "power_limit_w": 700.0,
        "info": {"gpu_names": ["NVIDIA H100 80GB HBM3"]},
        "windows": [{"time_s": 2.0, "energy_j": 812.4}, {"time_s": 1.5, "energy_j": 604.9}],
    }
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(recorded))
    meter = ReplayMeter.from_json(path)
    seen = []
    for _ in range(3):
        with meter.window() as box:
            pass
        seen.append(box[0])
    assert [(m.time_s, m.energy_j) for m in seen] == [(2.0, 812.4), (1.5, 604.9), (2.0, 812.4)]
    assert {m.source for m in seen} == {"measured-nvml"}
    assert meter.measure_idle_power_w(5.0) == 71.5
    assert meter.power_limit_w() == 700.0
    assert meter.device_info()["gpu_names"] == ["NVIDIA H100 80GB HBM3"]


def test_replay_rejects_unknown_source():
    with pytest.raises(ValueError, match="not one of"):
        ReplayMeter([Measurement(1.0, 1.0, "x")], source="guessed")


def test_energy_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="extra"):
        EnergyConfig(meter="auto", cpu_watt_per_core=3.0)
