"""Typed ``energy`` section of params.yaml: which meter, and the conventions behind its numbers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jouleroute.strict import StrictModel

# Per-core share of the package TDP of the CPU this project was developed on. The hypervisor
# shows only "AMD EPYC", family 25 model 1 (Zen 3 "Milan") at 2.45 GHz; the matching part,
# EPYC 7763, has 64 cores and a 280 W default TDP (AMD's spec sheet): 280 / 64 = 4.375 W per
# busy core. docs/energy.md says why a TDP share and how to pick it for another machine.
DEFAULT_CPU_WATTS_PER_CORE = 280.0 / 64

# NVML's total-energy counter advances about every 100 ms. A window ten periods long keeps the
# counter's quantization error under ~10 %; shorter windows get a logged warning.
NVML_UPDATE_PERIOD_S = 0.1
DEFAULT_MIN_WINDOW_S = 10 * NVML_UPDATE_PERIOD_S

# How much energy one prompt token is charged relative to one generated token (see
# jouleroute.energy.attribution and docs/energy.md for the measurement behind it).
DEFAULT_PREFILL_WEIGHT = 0.1


class EnergyConfig(StrictModel):
    """How energy is metered and how a batch window is split over its requests."""

    meter: Literal["auto", "zeus", "estimate"] = "auto"
    cpu_watts_per_core: float = Field(default=DEFAULT_CPU_WATTS_PER_CORE, gt=0)
    idle_seconds: float = Field(default=5.0, ge=0)  # idle-power measurement before a run
    min_window_s: float = Field(default=DEFAULT_MIN_WINDOW_S, ge=0)  # shorter windows are warned about
    gpu_indices: list[int] | None = None  # None: every visible GPU
    prefill_weight: float = Field(default=DEFAULT_PREFILL_WEIGHT, ge=0)
