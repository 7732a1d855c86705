"""Modelled energy and latency of one request, from a measured per-model reference.

RouterBench records no energy or time, so the replay models them (energy_source
"modelled") from ML.ENERGY leaderboard v2 measurements: vLLM serving in steady
state, one configuration per (model, GPU, batch size). The formulas, and why they
take this shape, are in docs/replay.md; in short, with
``s = energy.prefill_share x mapping.prefill_scale``::

    J_out  = Energy/req / Avg Output Tokens          (steady-state energy per output token)
    J_in   = s * J_out                               (a prompt token is cheaper: prefill is compute-bound)
    prefill_tokens_per_s = Token tput / s            (same power as decode, so speed scales inversely)
    energy_j  = input_tokens * J_in + output_tokens * J_out
    ttft_s    = input_tokens / prefill_tokens_per_s
    latency_s = ttft_s + output_tokens * TPOT
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jouleroute.paths import relative_to
from jouleroute.replay.config import EnergyMapping, EnergyModelConfig

_CONFIG_NAME = re.compile(r"^bs(\d+)\+tp(\d+)\+pp(\d+)\.json$")
_REQUIRED_FIELDS = ("Energy/req (J)", "Avg TPOT (s)", "Token tput (tok/s)", "Avg Output Tokens")


class EnergyReferenceError(ValueError):
    """An energy reference that cannot be read or does not fit: the message names the file or the params key."""


@dataclass(frozen=True)
class TokenEnergyModel:
    """Per-token energy and speed of one model; every request of that model is priced with it."""

    j_per_output_token: float
    j_per_input_token: float
    tpot_s: float
    prefill_tokens_per_s: float
    batch_size: int  # batch size of the reference measurement (the assumed one for user figures)
    reference: str  # human-readable: what was measured, where
    reference_file: str  # repo-relative file of the reference, or the params key of user figures

    def requests(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> dict[str, np.ndarray]:
        """Modelled ``energy_j``, ``ttft_s`` and ``latency_s`` for arrays of token counts."""
        input_tokens = np.asarray(input_tokens, dtype=np.float64)
        output_tokens = np.asarray(output_tokens, dtype=np.float64)
        energy_j = input_tokens * self.j_per_input_token + output_tokens * self.j_per_output_token
        ttft_s = input_tokens / self.prefill_tokens_per_s
        latency_s = ttft_s + output_tokens * self.tpot_s
        return {"energy_j": energy_j, "ttft_s": ttft_s, "latency_s": latency_s}


@dataclass(frozen=True)
class ReferenceConfig:
    """One ML.ENERGY configuration file, read and checked."""

    path: Path
    model: str
    gpu: str
    batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    energy_per_request_j: float
    avg_output_tokens: float
    tpot_s: float
    token_throughput_tok_s: float


def _read_config(path: Path, batch_size: int, tp: int, pp: int) -> ReferenceConfig:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise EnergyReferenceError(f"{path}: cannot read ML.ENERGY configuration: {err}") from err
    for key in _REQUIRED_FIELDS:
        value = data.get(key)
        if not isinstance(value, (int, float)) or not value > 0:
            raise EnergyReferenceError(f"{path}: field '{key}' must be a positive number, got {value!r}")
    return ReferenceConfig(
        path=path,
        model=str(data.get("Model", "")),
        gpu=str(data.get("GPU", "")),
        batch_size=batch_size,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        energy_per_request_j=float(data["Energy/req (J)"]),
        avg_output_tokens=float(data["Avg Output Tokens"]),
        tpot_s=float(data["Avg TPOT (s)"]),
        token_throughput_tok_s=float(data["Token tput (tok/s)"]),
    )


def find_reference(
    reference_dir: Path, model: str, workload: str, gpu: str, target_batch_size: int
) -> ReferenceConfig:
    """The measured configuration of ``model`` on ``gpu`` whose batch size is closest to the target.

    Ties in distance go to the smaller batch size (the less optimistic energy per
    token); several parallelism layouts at one batch size go to the fewest GPUs.
    """
    gpu_dir = reference_dir / "llm_text_generation" / workload / gpu
    if not gpu_dir.is_dir():
        task_dir = gpu_dir.parent
        known = sorted(p.name for p in task_dir.iterdir() if p.is_dir()) if task_dir.is_dir() else []
        raise EnergyReferenceError(
            f"no ML.ENERGY '{workload}' measurements for GPU '{gpu}' under {task_dir}; GPUs there: {known}"
        )
    model_dir = gpu_dir / model
    candidates = []
    if model_dir.is_dir():
        for path in sorted(model_dir.iterdir()):
            match = _CONFIG_NAME.match(path.name)
            if match:
                candidates.append((path, *(int(g) for g in match.groups())))
    if not candidates:
        known = sorted(f"{org.name}/{m.name}" for org in gpu_dir.iterdir() if org.is_dir() for m in org.iterdir())
        raise EnergyReferenceError(
            f"no ML.ENERGY configuration for '{model}' ({workload}, {gpu}) in {model_dir}; "
            f"measured models there: {known}. Copy its folder from the upstream data (see SOURCE.txt)."
        )
    path, bs, tp, pp = min(candidates, key=lambda c: (abs(c[1] - target_batch_size), c[1], c[2] * c[3]))
    return _read_config(path, bs, tp, pp)


def build_token_model(
    mapping: EnergyMapping, energy: EnergyModelConfig, repo_root: Path, params_key: str
) -> TokenEnergyModel:
    """Per-token figures for one mapping entry; ``params_key`` names the entry in errors and provenance."""
    share = energy.prefill_share * mapping.prefill_scale
    if share > 1:
        raise EnergyReferenceError(
            f"{params_key}: prefill_share x prefill_scale = {share:g} > 1 "
            "(a prompt token would cost more than an output token)"
        )
    if mapping.reference is None:
        # User-supplied figures (e.g. a closed API): the same formulas, with the user's numbers.
        assert mapping.j_per_output_token and mapping.tpot_s and mapping.prefill_tokens_per_s  # by validation
        return TokenEnergyModel(
            j_per_output_token=mapping.j_per_output_token,
            j_per_input_token=share * mapping.j_per_output_token,
            tpot_s=mapping.tpot_s,
            prefill_tokens_per_s=mapping.prefill_tokens_per_s,
            batch_size=energy.target_batch_size,
            reference="user-supplied figures",
            reference_file=f"params:{params_key}",
        )
    ref = find_reference(
        repo_root / energy.reference_dir, mapping.reference, mapping.workload, energy.gpu, energy.target_batch_size
    )
    j_out = ref.energy_per_request_j / ref.avg_output_tokens
    return TokenEnergyModel(
        j_per_output_token=j_out,
        j_per_input_token=share * j_out,
        tpot_s=ref.tpot_s,
        prefill_tokens_per_s=ref.token_throughput_tok_s / share,
        batch_size=ref.batch_size,
        reference=(
            f"ML.ENERGY v2 {mapping.workload}: {mapping.reference} on {energy.gpu}, "
            f"bs{ref.batch_size} tp{ref.tensor_parallel} pp{ref.pipeline_parallel}"
        ),
        reference_file=relative_to(ref.path, repo_root),
    )

