"""validate bounds avg_power_w by the power limit the tournament's meters recorded in run.json's run_state.

The devices are recorded by the tournament's own code (``_meter_for``: the meter's ``device_info()``) on top of
the real Zeus, with NVML stubbed at its boundary (``FakeNVML``, tests/energy/conftest.py): no GPU here. The run
state's layout is what ``finish_tournament`` writes: every worker under ``workers``, and with one worker its
record also at the run's top level.
"""

from __future__ import annotations

import json

import pytest

from jouleroute.energy import EnergyConfig
from jouleroute.stages.validate import power_limit_from_run_state
from jouleroute.tournament import run as tournament_run
from jouleroute.validation import ValidateConfig, ValidationError, run_validate
from tests.energy.conftest import FakeGPU, FakeNVML, forget_fake_gpus, reset_zeus_device_cache

from .conftest import CANDIDATES, write_profile


@pytest.fixture
def worker_device(monkeypatch):
    """``device(cuda_visible_devices)``: what a tournament worker pinned to that GPU records (400 W, 400 W, 700 W)."""
    FakeNVML(gpus=[FakeGPU("NVIDIA A100-SXM4-40GB", 400_000), FakeGPU("NVIDIA A100-SXM4-40GB", 400_000),
                   FakeGPU("NVIDIA H100 80GB HBM3", 700_000)]).install(monkeypatch)
    monkeypatch.setattr(tournament_run, "_METERS", {})  # each call below is another worker process

    def device(visible: str, meter: str = "auto") -> dict:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        reset_zeus_device_cache(monkeypatch)
        _, _, recorded = tournament_run._meter_for(EnergyConfig(meter=meter, idle_seconds=0.0), f"run-{visible}")
        return recorded

    yield device
    forget_fake_gpus()


def _state(*devices: dict) -> dict:
    run = {"run_id": "r1", "workers": {f"tcp://w{i}": {"idle_power_w": 50.0, "meter": d.get("source"), "device": d}
                                       for i, d in enumerate(devices)}}
    if len(devices) == 1:
        run.update(next(iter(run["workers"].values())))
    return json.loads(json.dumps({"runs": [{"run_id": "r0"}, run]}))  # r0: a resumed run that computed nothing


def test_one_workers_gpu_limit_is_read(worker_device):
    assert power_limit_from_run_state(_state(worker_device("2"))) == 700.0


def test_several_workers_bound_by_the_largest_of_their_limits(worker_device):
    assert power_limit_from_run_state(_state(worker_device("0"), worker_device("2"))) == 700.0
    assert power_limit_from_run_state(_state(worker_device("0"), worker_device("1"))) == 400.0


def test_a_worker_with_no_stated_limit_leaves_the_profile_unbounded(worker_device):
    assert power_limit_from_run_state(_state(worker_device("0"), worker_device("1", meter="estimate"))) is None
    assert power_limit_from_run_state({}) is None


def test_a_run_state_recorded_before_power_limit_w_is_not_bounded():
    # its gpu_power_limits_w were read at Zeus's CUDA index as if physical: under CUDA_VISIBLE_DEVICES, another GPU's
    old = {"meter": "zeus", "gpu_names": ["a"], "gpu_power_limits_w": [400.0], "cuda_visible_devices": "2"}
    assert power_limit_from_run_state({"runs": [{"run_id": "r", "device": old}]}) is None


def test_a_row_far_above_the_recorded_limit_fails_validation(paths, valid_tables, worker_device):
    _, profile = valid_tables
    bad = profile.copy()
    bad.loc[2, "avg_power_w"] = 1100.0  # over 1.5x the H100's 700 W: a meter error, not a short window
    write_profile(bad, paths["profile"])
    with pytest.raises(ValidationError, match="1.5 x the power limit 700"):
        run_validate(paths["profile"], paths["out"], ValidateConfig(data_docs=False), queries_path=paths["queries"],
                     candidate_ids=CANDIDATES, power_limit_w=power_limit_from_run_state(_state(worker_device("2"))))


def test_a_short_window_at_the_cap_reading_above_the_limit_passes(paths, valid_tables, worker_device):
    """NVML's counter moves in ~0.1 s steps: a 0.15 s window at a 700 W cap can read ~930 W (helper model)."""
    _, profile = valid_tables
    stepped = profile.copy()
    stepped.loc[2, "avg_power_w"] = 930.0
    write_profile(stepped, paths["profile"])
    result = run_validate(paths["profile"], paths["out"], ValidateConfig(data_docs=False),
                          queries_path=paths["queries"], candidate_ids=CANDIDATES,
                          power_limit_w=power_limit_from_run_state(_state(worker_device("2"))))
    assert result.success
