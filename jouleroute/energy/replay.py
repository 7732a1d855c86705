"""Replays recorded Measurements, so tests and demos run on realistic numbers without hardware."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from jouleroute.energy.base import Measurement, Meter


class ReplayMeter(Meter):
    """Each ``end`` returns the next recorded window; ``begin``/``end`` take no real time."""

    def __init__(
        self,
        windows: Iterable[Measurement],
        idle_power_w: float = 0.0,
        source: str = "measured-nvml",
        info: dict[str, object] | None = None,
        power_limit_w: float | None = None,
    ) -> None:
        # Imported here: jouleroute.schema needs pyarrow, and the meters must import on a bare GPU host.
        from jouleroute.schema import ENERGY_SOURCES

        if source not in ENERGY_SOURCES:
            raise ValueError(f"source '{source}' is not one of {ENERGY_SOURCES}")
        self.source = source
        self._windows = [Measurement(w.time_s, w.energy_j, source, dict(w.per_device_j)) for w in windows]
        if not self._windows:
            raise ValueError("ReplayMeter needs at least one recorded window")
        self._next = 0
        self._idle_power_w = idle_power_w
        self._info = info or {"meter": "replay"}
        self._power_limit_w = power_limit_w

    @classmethod
    def from_json(cls, path: Path) -> "ReplayMeter":
        """Load ``{"source", "idle_power_w", "windows": [{"time_s", "energy_j", ...}], ...}``."""
        data = json.loads(Path(path).read_text())
        windows = [
            Measurement(w["time_s"], w["energy_j"], data["source"], w.get("per_device_j", {})) for w in data["windows"]
        ]
        return cls(windows, data.get("idle_power_w", 0.0), data["source"], data.get("info"), data.get("power_limit_w"))

    def begin(self) -> int:
        return self._next

    def end(self, token: object) -> Measurement:
        # Cycles when a test asks for more windows than were recorded.
        window = self._windows[self._next % len(self._windows)]
        self._next += 1
        return Measurement(window.time_s, window.energy_j, window.source, dict(window.per_device_j))

    def measure_idle_power_w(self, seconds: float) -> float:
        return self._idle_power_w

    def device_info(self) -> dict[str, object]:
        # the bound is recorded where the meter's other facts are, as ZeusMeter's device_info records it
        limit = {} if self._power_limit_w is None else {"power_limit_w": self._power_limit_w}
        return limit | dict(self._info)

    def power_limit_w(self) -> float | None:
        return self._power_limit_w
