"""Typed ``energy`` and ``energy_policy`` sections of params.yaml: which meter measures the joules, and how
every stage after the tournament compares them."""

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

# How joules are scaled to [0, 1] across the pool (jouleroute.routing.scores.normalize_energy).
EnergyNorm = Literal["max", "linear", "log"]
ENERGY_NORMS: tuple[str, ...] = ("max", "linear", "log")
# The profile's energy columns (jouleroute.schema): raw, or with idle power subtracted.
EnergyColumn = Literal["energy_j", "energy_net_j"]

# How much energy one prompt token is charged relative to one generated token (see
# jouleroute.energy.attribution and docs/energy.md for the measurement behind it).
DEFAULT_PREFILL_WEIGHT = 0.1


class EnergyConfig(StrictModel):
    """How energy is metered and how a batch window is split over its requests. The descriptions are the
    comments of docs/energy.md's params block (scripts/doc_figures.py writes it from these models)."""

    meter: Literal["auto", "zeus", "estimate"] = Field(
        default="auto", description="auto: Zeus (NVML/RAPL) where usable, else the labelled CPU-time estimate")
    cpu_watts_per_core: float = Field(default=DEFAULT_CPU_WATTS_PER_CORE, gt=0,
                                      description="the estimate only: W charged per busy core (see below)")
    idle_seconds: float = Field(default=5.0, ge=0, description="idle-power measurement before a run")
    min_window_s: float = Field(default=DEFAULT_MIN_WINDOW_S, ge=0, description="shorter windows are warned about")
    gpu_indices: list[int] | None = Field(default=None, description="null: every visible GPU")
    prefill_weight: float = Field(default=DEFAULT_PREFILL_WEIGHT, ge=0,
                                  description="attribution: a prompt token's cost relative to a generated one")
    served_client_estimate: bool = Field(default=False, description=(
        "backend.kind openai only: true lets a pool entry without `energy` be metered on this client "
        "(its CPU time, labelled estimated: not the server's energy); false refuses it"))


class EnergyPolicy(StrictModel):
    """How measured joules are compared: one policy, read by every stage that compares them (router_data's
    labels, GRPO's reward, the held-out checks, the baselines, evaluate, the champion's val utility).

    A section of its own, apart from ``energy`` (the meter): DVC tracks params per key, and a stage that
    depends on ``energy`` reruns on any change there, so a norm experiment would re-measure the tournament.
    """

    norm: EnergyNorm = Field(default="max", description="max: e / max over the pool; linear: min-max; "
                                                       "log: min-max on ln e")
    column: EnergyColumn = Field(default="energy_j", description="energy_net_j: idle power subtracted")
    allow_mixed_sources: bool = Field(default=False, description=(
        "true: validate, router_data, `jouleroute import` and evaluate accept figures with several "
        "energy_source labels (evaluate labels them 'mixed:...')"))
