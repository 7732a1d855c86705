"""A labelled estimate for machines with no energy counter: process CPU time x watts per core.

``time.process_time`` counts user+system CPU time of every thread of this process, so a
window's estimate is ``cpu_seconds * cpu_watts_per_core``. It only sees this process: work
done by another process (an inference server behind the ``openai`` backend) is not counted.
Every thread of it is, though: in a Dask worker, its event loop, heartbeats and profiler too,
which is why the tournament's flow starts its workers without what they need not run
(flows/dask_workers.py). Every Measurement it returns is labelled ``estimated``.
"""

from __future__ import annotations

import os
import platform
import time

from jouleroute.energy.base import Measurement, Meter
from jouleroute.energy.config import DEFAULT_CPU_WATTS_PER_CORE


class EstimateMeter(Meter):
    source = "estimated"

    def __init__(self, cpu_watts_per_core: float = DEFAULT_CPU_WATTS_PER_CORE) -> None:
        if cpu_watts_per_core <= 0:
            raise ValueError(f"cpu_watts_per_core must be > 0, got {cpu_watts_per_core}")
        self.cpu_watts_per_core = cpu_watts_per_core

    def begin(self) -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def end(self, token: object) -> Measurement:
        wall0, cpu0 = token  # type: ignore[misc]
        wall_s = time.perf_counter() - wall0
        cpu_s = time.process_time() - cpu0
        energy_j = cpu_s * self.cpu_watts_per_core
        return Measurement(time_s=wall_s, energy_j=energy_j, source=self.source, per_device_j={"cpu-process": energy_j})

    def measure_idle_power_w(self, seconds: float) -> float:
        """Power this process draws while idle, by the same estimate (about 0 W by construction).

        The convention: idle power is what the *same* estimate reports while nothing runs, so
        ``energy_net_j`` subtracts only this process's background threads, not the machine's
        idle draw, which an estimate from CPU time cannot see.
        """
        token = self.begin()
        time.sleep(seconds)
        return self.end(token).avg_power_w

    def device_info(self) -> dict[str, object]:
        return {
            "meter": "estimate",
            "cpu_model": _cpu_model(),
            "logical_cpus": os.cpu_count(),
            "cpu_watts_per_core": self.cpu_watts_per_core,
        }

    def power_limit_w(self) -> float | None:
        # One busy core per logical CPU is the most this estimate can ever report.
        return self.cpu_watts_per_core * (os.cpu_count() or 1)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
