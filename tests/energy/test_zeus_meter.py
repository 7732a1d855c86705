"""ZeusMeter and make_meter on top of the real Zeus, with NVML stubbed at its boundary.

There is no GPU on this machine; ``fake_nvml`` (conftest.py) replaces the NVML driver
calls only, and the test moves its energy counter.
"""

from __future__ import annotations

import logging

import pytest

from jouleroute.energy import EnergyConfig, MeterUnavailableError, ZeusMeter, make_meter, nvml_usable, rapl_usable


def test_window_energy_is_the_nvml_counter_difference(fake_nvml):
    meter = ZeusMeter(min_window_s=0.0)
    token = meter.begin()
    fake_nvml.add_energy(0, 812.5)
    m = meter.end(token)
    assert m.source == "measured-nvml"
    assert m.energy_j == pytest.approx(812.5)
    assert m.per_device_j == {"gpu0": pytest.approx(812.5)}
    assert m.time_s >= 0.0


def test_two_gpus_are_summed(fake_nvml):
    fake_nvml.gpus.append(type(fake_nvml.gpus[0])(energy_mj=5))
    meter = ZeusMeter(min_window_s=0.0)
    token = meter.begin()
    fake_nvml.add_energy(0, 100.0)
    fake_nvml.add_energy(1, 50.0)
    m = meter.end(token)
    assert m.energy_j == pytest.approx(150.0)
    assert set(m.per_device_j) == {"gpu0", "gpu1"}


def test_short_window_is_warned_about_once(fake_nvml, caplog):
    meter = ZeusMeter(min_window_s=60.0)
    caplog.set_level(logging.DEBUG, logger="jouleroute.energy.zeus_meter")
    for _ in range(2):
        token = meter.begin()
        fake_nvml.add_energy(0, 1.0)
        meter.end(token)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "shorter than" in r.message]
    assert len(warnings) == 1
    assert meter.short_windows == 2


def test_device_info_and_power_limit_come_from_nvml(fake_nvml):
    meter = ZeusMeter()
    info = meter.device_info()
    assert info["gpu_names"] == ["NVIDIA H100 80GB HBM3"]
    assert info["gpu_power_limits_w"] == [700.0]
    assert info["driver_version"] == "550.54.15"
    assert meter.power_limit_w() == 700.0


def test_auto_picks_zeus_when_nvml_answers(fake_nvml):
    assert nvml_usable()
    meter = make_meter(EnergyConfig(meter="auto", gpu_indices=[0]))
    assert isinstance(meter, ZeusMeter)
    assert meter.source == "measured-nvml"


def test_zeus_without_any_counter_says_what_to_fix():
    # No stub here: runs where the machine really has neither NVML nor RAPL (as this one).
    if nvml_usable() or rapl_usable():
        pytest.skip("this machine has a readable energy counter")
    with pytest.raises(MeterUnavailableError, match="/sys/class/powercap") as error:
        make_meter(EnergyConfig(meter="zeus"))
    assert "energy.meter='estimate'" in str(error.value)


def test_rapl_usable_needs_a_readable_package_counter(tmp_path):
    zone = tmp_path / "intel-rapl" / "intel-rapl:0"
    assert not rapl_usable((str(tmp_path / "intel-rapl"),))
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text("123456\n")
    assert rapl_usable((str(tmp_path / "intel-rapl"),))
