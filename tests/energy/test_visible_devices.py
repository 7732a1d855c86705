"""The GPU facts recorded beside a measurement are those of the GPU it was read on, under CUDA_VISIBLE_DEVICES.

No GPU here: NVML is stubbed at its boundary (``FakeNVML``, conftest.py); Zeus and ZeusMeter run for real on top.
The node has two A100s (40 GB, 400 W) then two H100s (700 W); docs/orchestration.md pins one Dask worker per GPU
with ``CUDA_VISIBLE_DEVICES=<i>``.
"""

from __future__ import annotations

import pytest

from jouleroute.energy import MeterUnavailableError, ZeusMeter
from jouleroute.energy.nvml_devices import UNKNOWN_GPU, nvml_device_info

from .conftest import FakeGPU, FakeNVML, forget_fake_gpus

A100, H100 = "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"


@pytest.fixture
def node(monkeypatch):
    fake = FakeNVML(gpus=[FakeGPU(A100, 400_000), FakeGPU(A100, 400_000), FakeGPU(H100, 700_000),
                          FakeGPU(H100, 700_000)])
    fake.install(monkeypatch)
    yield fake
    forget_fake_gpus()


def test_a_worker_pinned_to_gpu_2_records_gpu_2(node, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    meter = ZeusMeter(min_window_s=0.0)
    token = meter.begin()
    node.add_energy(2, 500.0)
    assert meter.end(token).energy_j == pytest.approx(500.0)  # Zeus reads physical GPU 2 ...
    info = meter.device_info()  # ... and the facts are GPU 2's, not CUDA index 0's read as NVML's GPU 0
    assert info["gpu_names"] == [H100] and info["gpu_nvml_indices"] == [2]
    assert info["gpu_power_limits_w"] == [700.0] and info["power_limit_w"] == 700.0
    assert meter.power_limit_w() == 700.0


def test_an_index_list_maps_in_its_own_order(node, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 1")
    meter = ZeusMeter(gpu_indices=[1], min_window_s=0.0)
    info = meter.device_info()
    assert info["gpu_nvml_indices"] == [1] and info["gpu_names"] == [A100] and meter.power_limit_w() == 400.0
    assert nvml_device_info([0, 1])["gpu_names"] == [H100, A100]


def test_uuids_are_looked_up_in_nvml_and_an_unmappable_gpu_is_unknown(node, monkeypatch):
    uuid = node.gpus[2].uuid
    for visible in (uuid, uuid[:12]):  # CUDA takes a whole UUID or a unique prefix
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert nvml_device_info([0])["gpu_names"] == [H100]
    for visible in ("GPU-8", "GPU-00000000", "MIG-0f1e2d3c", "0"):  # ambiguous, no such GPU, a MIG slice, too few
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        info = nvml_device_info([1] if visible == "0" else [0])
        assert info["gpu_names"] == [UNKNOWN_GPU] and info["gpu_power_limits_w"] == [None]
        assert "power_limit_w" not in info  # no bound rather than another GPU's


def test_zeus_refuses_uuids_with_a_fix(node, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", node.gpus[2].uuid)
    with pytest.raises(MeterUnavailableError, match="name the GPUs by index"):
        ZeusMeter(min_window_s=0.0)
