"""Measured energy through Zeus: GPUs via NVML's energy counter, CPU packages via RAPL.

When any GPU is metered, ``energy_j`` is the GPUs' energy and the label is
``measured-nvml``; RAPL readings (if any) are kept in ``per_device_j`` under ``rapl-cpu<i>``
/ ``rapl-dram<i>`` but not added, so one label never covers two kinds of counter. With
no GPU, ``energy_j`` is CPU package + DRAM energy, labelled ``measured-rapl``.
"""

from __future__ import annotations

import itertools
import logging
import os
import time

from jouleroute.energy.base import Measurement, Meter
from jouleroute.energy.config import DEFAULT_MIN_WINDOW_S
from jouleroute.energy.nvml_devices import nvml_device_info

logger = logging.getLogger(__name__)


class MeterUnavailableError(RuntimeError):
    """No energy counter can be read; the message says what is missing and how to fix it."""


class ZeusMeter(Meter):
    def __init__(self, gpu_indices: list[int] | None = None, min_window_s: float = DEFAULT_MIN_WINDOW_S) -> None:
        from zeus.monitor import ZeusMonitor

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            self._monitor = ZeusMonitor(gpu_indices=gpu_indices)
        except ValueError as error:
            if visible is None or all(e.strip().isdigit() for e in visible.split(",")):
                raise
            # Zeus reads CUDA_VISIBLE_DEVICES as integers only; its own error is "invalid literal for int()".
            raise MeterUnavailableError(f"Zeus cannot read CUDA_VISIBLE_DEVICES={visible!r}: name the GPUs by "
                                        "index (`nvidia-smi -L` lists them), not by UUID") from error
        self.gpu_indices = list(self._monitor.gpu_indices)
        self.cpu_indices = list(self._monitor.cpu_indices)
        if not self.gpu_indices and not self.cpu_indices:
            raise MeterUnavailableError(missing_counters_message())
        self.source = "measured-nvml" if self.gpu_indices else "measured-rapl"
        self.min_window_s = min_window_s
        self.short_windows = 0  # how many windows were shorter than min_window_s
        self._keys = itertools.count()
        self._sync = self.gpu_indices and _cuda_available()

    def begin(self) -> str:
        key = f"jouleroute-{next(self._keys)}"
        self._monitor.begin_window(key, sync_execution=bool(self._sync))
        return key

    def end(self, token: object) -> Measurement:
        raw = self._monitor.end_window(str(token), sync_execution=bool(self._sync))
        per_device = {f"gpu{i}": float(j) for i, j in raw.gpu_energy.items()}
        rapl = {f"rapl-cpu{i}": float(j) for i, j in (raw.cpu_energy or {}).items()}
        rapl |= {f"rapl-dram{i}": float(j) for i, j in (raw.dram_energy or {}).items()}
        energy_j = sum(per_device.values()) if self.gpu_indices else sum(rapl.values())
        self._check_window(raw.time)
        return Measurement(float(raw.time), energy_j, self.source, per_device_j=per_device | rapl)

    def _check_window(self, time_s: float) -> None:
        if time_s >= self.min_window_s:
            return
        self.short_windows += 1
        # Warn once loudly; a tournament with many short batches would otherwise flood the log.
        log = logger.warning if self.short_windows == 1 else logger.debug
        log(
            "energy window of %.3f s is shorter than min_window_s=%.2f s (NVML's counter updates about every "
            "0.1 s): its energy may be quantized or zero. Batch more work per window. (%d short so far)",
            time_s,
            self.min_window_s,
            self.short_windows,
        )

    def measure_idle_power_w(self, seconds: float) -> float:
        token = self.begin()
        time.sleep(seconds)
        return self.end(token).avg_power_w

    def device_info(self) -> dict[str, object]:
        info: dict[str, object] = {"meter": "zeus", "source": self.source, "cpu_indices": self.cpu_indices}
        info |= nvml_device_info(self.gpu_indices)
        return info

    def power_limit_w(self) -> float | None:
        return nvml_device_info(self.gpu_indices).get("power_limit_w")  # type: ignore[return-value]


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def missing_counters_message() -> str:
    return (
        "energy.meter='zeus' but no energy counter is readable: NVML found no NVIDIA GPU "
        "(needs the driver and `nvidia-ml-py`), and RAPL is not readable "
        "(/sys/class/powercap/intel-rapl is absent, or its energy_uj files are root-only). "
        "Fix: run on a GPU host; or on a bare-metal Intel/AMD host make RAPL readable, e.g. "
        "`sudo chmod -R a+r /sys/class/powercap/intel-rapl` (or deploy zeusd); in a container, "
        "bind-mount /sys/class/powercap to /zeus_sys/class/powercap. Otherwise set "
        "energy.meter='estimate' (figures are then labelled 'estimated')."
    )
