"""The meter interface: every energy number comes out of one of these, with its label."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class Measurement:
    """One measurement window. Units are in the field names.

    ``energy_j`` is the raw energy of the window (all metered devices summed);
    ``source`` is one of ``jouleroute.schema.ENERGY_SOURCES``.
    """

    time_s: float
    energy_j: float
    source: str
    per_device_j: dict[str, float] = field(default_factory=dict)

    @property
    def avg_power_w(self) -> float:
        return self.energy_j / self.time_s if self.time_s > 0 else 0.0


class Meter(ABC):
    """Measures energy over windows. Implementations: Zeus (NVML/RAPL), CPU-time estimate, replay."""

    source: str  # the label every Measurement from this meter carries

    @abstractmethod
    def begin(self) -> object:
        """Start a window; returns an opaque token for ``end``."""

    @abstractmethod
    def end(self, token: object) -> Measurement:
        """Close the window started by ``begin``."""

    @contextmanager
    def window(self) -> Iterator[list[Measurement]]:
        """``with meter.window() as box: ...`` then ``box[0]`` is the Measurement."""
        box: list[Measurement] = []
        token = self.begin()
        try:
            yield box
        finally:
            box.append(self.end(token))

    @abstractmethod
    def measure_idle_power_w(self, seconds: float) -> float:
        """Mean power while nothing runs, measured over ``seconds``."""

    def device_info(self) -> dict[str, object]:
        """GPU name, power limit, driver... (nvidia-ml-py) or CPU model; empty when unknown."""
        return {}

    def power_limit_w(self) -> float | None:
        """Upper bound on the window's average power, when the hardware states one."""
        return None
