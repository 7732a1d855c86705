"""Energy of a served candidate's batch: read on its GPU node's exporter, or modelled from its tokens.

A served candidate (``backend.kind: openai``) answers on another machine; this process's CPU time says
nothing about it and is never recorded as its energy. Each batch is one window: the exporter's counter of
the candidate's GPUs is read before the first request and after the last answer, and the rise is split
over the batch's requests by the token-weighted rule of in-process batches (``energy.attribution``). The
row's ``energy_attribution`` names the exporter and GPUs. Idle power is the same GPUs' mean power over
``energy.idle_seconds`` before the candidate's first window, read on the same exporter.

Without an exporter, or once it stops answering (a warning says so, and the run goes on), rows are
``modelled``: ``output_tokens x J_out + input_tokens x J_in`` from the candidate's ML.ENERGY reference (or
user figures), as the replay study prices RouterBench; their idle power is 0 (the reference's figure is
the whole steady-state draw) and ``energy_net_j = energy_j``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from jouleroute.backends import GenResult
from jouleroute.energy import Measurement, attribute_window, attribution_rule
from jouleroute.energy.exporter import ExporterError, ExporterMeter
from jouleroute.pool import CandidateSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelledRate:
    """Per-token joules of one served candidate when nothing measures it (``energy_source`` modelled)."""

    j_per_output_token: float
    j_per_input_token: float
    reference: str  # what stands in for the model, in words
    reference_file: str  # repo-relative file, or the params key of user figures

    def rule(self) -> str:
        return (f"modelled:energy_j=output_tokens*{self.j_per_output_token:.6g}+input_tokens*"
                f"{self.j_per_input_token:.6g};reference={self.reference} ({self.reference_file})")


@dataclass
class BatchEnergy:
    measurement: Measurement
    shares: list[tuple[float, float]]  # (energy_j, energy_net_j) per request
    idle_power_w: float
    rule: str


class ServedBatchMeter:
    """One served candidate's meter for a run: its exporter while it answers, else its modelled rate."""

    def __init__(self, candidate: CandidateSpec, rate: ModelledRate, idle_seconds: float,
                 prefill_weight: float) -> None:
        energy = candidate.energy
        assert energy is not None  # served candidates name one (config.Params checks)
        self.candidate_id, self.rate, self.prefill_weight = candidate.candidate_id, rate, prefill_weight
        self.url, self.gpus = energy.exporter_url, energy.gpus
        self.exporter: ExporterMeter | None = None
        self.idle_power_w = 0.0
        self.failure: str | None = None
        if self.url is not None:
            try:
                self.exporter = ExporterMeter(self.url, list(energy.gpus or []), energy.metric,
                                              energy.scrape_timeout_s)
                self.idle_power_w = self.exporter.measure_idle_power_w(idle_seconds)
            except ExporterError as error:
                self._lost(error)

    @property
    def source(self) -> str:
        return self.exporter.source if self.exporter is not None else "modelled"

    def device_info(self) -> dict[str, object]:
        if self.exporter is not None:
            return self.exporter.device_info() | {"idle_power_w": self.idle_power_w}
        return {"meter": "modelled", "reference": self.rate.reference, "reference_file": self.rate.reference_file,
                "exporter_url": self.url, "exporter_failure": self.failure}

    def _lost(self, error: Exception) -> None:
        self.failure = str(error)
        if self.exporter is not None:
            self.exporter.close()
        self.exporter = None
        logger.warning("candidate %s: exporter %s not readable (%s); its rows from here on are MODELLED from "
                       "tokens (%s), never the client's CPU time", self.candidate_id, self.url, error,
                       self.rate.reference)

    def measure(self, run: Callable[[], list[GenResult]]) -> tuple[list[GenResult], BatchEnergy]:
        """Run one batch (``run``) inside a window; its results and their energy."""
        token = None
        if self.exporter is not None:
            try:
                token = self.exporter.begin()
            except ExporterError as error:
                self._lost(error)
        started = time.perf_counter()
        results = run()
        elapsed = time.perf_counter() - started
        inputs, outputs = [r.input_tokens for r in results], [r.output_tokens for r in results]
        if self.exporter is not None and token is not None:
            try:
                window = self.exporter.end(token)
            except ExporterError as error:
                self._lost(error)
            else:
                shares = attribute_window(window, inputs, outputs, self.idle_power_w, self.prefill_weight)
                rule = f"{attribution_rule(self.prefill_weight)};meter=exporter:{self.url};gpus={self.gpus}"
                return results, BatchEnergy(window, shares, self.idle_power_w, rule)
        energies = [o * self.rate.j_per_output_token + i * self.rate.j_per_input_token
                    for i, o in zip(inputs, outputs)]
        window = Measurement(elapsed, sum(energies), "modelled", {})
        rule = self.rate.rule() + (f";exporter {self.url} unavailable: {self.failure}" if self.url else "")
        return results, BatchEnergy(window, [(e, e) for e in energies], 0.0, rule)


# One meter per (run, candidate) and process: the fallback, once taken, holds for the rest of the run.
_SERVED: dict[tuple[str, str], ServedBatchMeter] = {}


def served_meter(run_id: str, candidate: CandidateSpec, rate: ModelledRate, idle_seconds: float,
                 prefill_weight: float) -> ServedBatchMeter:
    key = (run_id, candidate.candidate_id)
    if key not in _SERVED:
        for old in [k for k in _SERVED if k[0] != run_id]:
            del _SERVED[old]
        _SERVED[key] = ServedBatchMeter(candidate, rate, idle_seconds, prefill_weight)
    return _SERVED[key]
