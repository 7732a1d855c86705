"""Fixtures for the energy tests.

``fake_nvml`` stands in for the NVML driver library, patched into the real ``pynvml``
module: this machine has no GPU, so ``nvmlInit`` would raise ``NVMLError_LibraryNotFound``.
Only the NVML entry points Zeus and jouleroute call are replaced; everything above them
(Zeus's ZeusMonitor, jouleroute's ZeusMeter) is the real code. The test advances the
energy counter, in millijoules, the way the driver reports it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pynvml
import pytest


_UUIDS = itertools.count(0x8932F937)


@dataclass
class FakeGPU:
    name: str = "NVIDIA H100 80GB HBM3"
    power_limit_mw: int = 700_000
    energy_mj: int = 1_000_000  # counters start at an arbitrary value since driver load
    uuid: str = field(default_factory=lambda: f"GPU-{next(_UUIDS):08x}-d72c-4106-c12f-20bd9faed9f6")


@dataclass
class FakeNVML:
    gpus: list[FakeGPU] = field(default_factory=lambda: [FakeGPU()])
    driver_version: str = "550.54.15"

    def add_energy(self, index: int, joules: float) -> None:
        self.gpus[index].energy_mj += round(joules * 1000)

    def install(self, monkeypatch) -> None:
        def not_supported(*_args):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

        patches = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": lambda i: self.gpus[i],
            "nvmlDeviceGetC2cModeInfoV": not_supported,
            "nvmlDeviceGetArchitecture": lambda h: pynvml.NVML_DEVICE_ARCH_HOPPER,
            "nvmlDeviceGetTotalEnergyConsumption": lambda h: h.energy_mj,
            "nvmlDeviceGetName": lambda h: h.name,
            "nvmlDeviceGetUUID": lambda h: h.uuid,
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: h.power_limit_mw,
            "nvmlSystemGetDriverVersion": lambda: self.driver_version,
        }
        for name, fn in patches.items():
            monkeypatch.setattr(pynvml, name, fn)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
        reset_zeus_device_cache(monkeypatch)


def reset_zeus_device_cache(monkeypatch) -> None:
    """Zeus keeps the GPU set it found in module globals; clear it before and after a test."""
    import zeus.device.gpu as zeus_gpu
    from zeus.device.gpu.nvidia import nvml_is_available

    nvml_is_available.cache_clear()
    monkeypatch.setattr(zeus_gpu, "_gpus", None)


def forget_fake_gpus() -> None:
    """After a test: later tests see this machine as it is (no NVML), not Zeus's cached answer."""
    from zeus.device.gpu.nvidia import nvml_is_available

    nvml_is_available.cache_clear()


@pytest.fixture
def fake_nvml(monkeypatch):
    """NVML stubbed at its boundary (no GPU on this machine); Zeus runs for real on top."""
    fake = FakeNVML()
    fake.install(monkeypatch)
    yield fake
    forget_fake_gpus()
