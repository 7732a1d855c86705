"""Stage `tournament`: every candidate answers every query; each pair's correctness,
latency, tokens, power and energy are recorded.

Batches run inside meter windows. A window's energy is split over its requests
by ``jouleroute.energy.attribute_window`` (rule stored per row in
``energy_attribution``). Idle power is measured once per run, before any model
loads, and kept in the run state so a resumed run uses the same figure.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
from pydantic import Field

from jouleroute.backends import BackendConfig, GenRequest, make_backend
from jouleroute.benchmarks import get_task
from jouleroute.energy import EnergyConfig, attribute_window, attribution_rule, make_meter
from jouleroute.pool import CandidateSpec, ModelSpec
from jouleroute.provenance import stable_hash
from jouleroute.shards import ShardStore, write_profile
from jouleroute.strict import StrictModel

logger = logging.getLogger(__name__)

ProgressFactory = Callable[[int, str], Callable[[int], None]]


class TournamentConfig(StrictModel):
    seed: int = 0
    warmup_batches: int = Field(default=1, ge=0, description="batches run before measuring, outside any window")
    splits: list[str] = Field(default_factory=lambda: ["train", "val", "test"])


@dataclass
class TournamentInputs:
    queries: pd.DataFrame
    pool: Sequence[CandidateSpec]
    models: dict[str, ModelSpec]
    backend: BackendConfig
    energy: EnergyConfig
    config: TournamentConfig
    models_dir: Path
    shards_dir: Path
    profile_path: Path
    data_dir: Path  # benchmark files, for few-shot exemplars


def build_request(row: pd.Series, candidate: CandidateSpec, data_dir: Path) -> GenRequest:
    task = get_task(row["task"])
    if candidate.prompt_style == "chat":
        return GenRequest(prompt=None, messages=task.chat_messages(row, candidate.answer_style),
                          max_new_tokens=candidate.max_new_tokens, stop=[])
    return GenRequest(prompt=task.fewshot_prompt(row, candidate.answer_style, data_dir=data_dir), messages=None,
                      max_new_tokens=candidate.max_new_tokens, stop=list(task.stop_sequences(candidate.answer_style)))


def config_hash(inp: TournamentInputs) -> str:
    """What makes two runs' shards comparable: the backend and the meter.

    The query set is not part of it: query ids are stable, so growing the sample
    only computes the new queries, and the profile keeps only the current ones.
    """
    return stable_hash({
        "backend": inp.backend.model_dump(),
        "energy": inp.energy.model_dump(),
        "seed": inp.config.seed,
    })


def candidate_key(candidate: CandidateSpec, model: ModelSpec) -> str:
    """Shard folder of one candidate version: its id plus a hash of how it is asked."""
    return f"{candidate.candidate_id}-{stable_hash([candidate.model_dump(), model.model_dump()], 8)}"


def run_tournament(inp: TournamentInputs, run_id: str, progress: ProgressFactory | None = None) -> pd.DataFrame:
    """Run (or resume) the tournament; write and return the profile."""
    _seed(inp.config.seed)
    queries = inp.queries[inp.queries["split"].isin(inp.config.splits)]
    queries = queries.sort_values(["task", "query_id"]).reset_index(drop=True)  # fixed order; similar prompts batch together
    store = ShardStore(inp.shards_dir)
    state = store.open(config_hash(inp))
    keys = {c.candidate_id: candidate_key(c, inp.models[c.model]) for c in inp.pool}
    store.prune(list(keys.values()))
    done = store.done_pairs(list(keys.values()))
    todo = {c.candidate_id: queries[[(q, c.candidate_id) not in done for q in queries["query_id"]]] for c in inp.pool}
    logger.info("tournament: %d queries x %d candidates, %d pairs already done", len(queries), len(inp.pool), len(done))
    meter = make_meter(inp.energy)
    idle_w = 0.0
    if any(len(t) for t in todo.values()):
        # Idle power once per run, before any model is loaded; every row of this run records it.
        idle_w = meter.measure_idle_power_w(inp.energy.idle_seconds)
        state.setdefault("runs", []).append({"run_id": run_id, "idle_power_w": idle_w, "meter": meter.source,
                                             "device": meter.device_info()})
        store.save_state(state)
    for candidate in inp.pool:
        pending = todo[candidate.candidate_id]
        if not pending.empty:
            _run_candidate(inp, candidate, keys[candidate.candidate_id], pending, store, meter, idle_w, run_id, progress)
    profile = store.read_all(list(keys.values()))
    profile = profile[profile["query_id"].isin(set(queries["query_id"]))]
    _check_complete(profile, queries, inp.pool)
    profile = profile.sort_values(["candidate_id", "query_id"]).reset_index(drop=True)
    write_profile(profile, inp.profile_path)
    return profile


def _run_candidate(inp, candidate, key, pending, store, meter, idle_w, run_id, progress) -> None:
    spec = inp.models[candidate.model]
    backend = make_backend(inp.backend, candidate.model, spec, inp.models_dir)
    tick = progress(len(pending), candidate.candidate_id) if progress else (lambda n: None)
    try:
        batches = [pending.iloc[i:i + candidate.batch_size] for i in range(0, len(pending), candidate.batch_size)]
        for batch in batches[: inp.config.warmup_batches]:  # warm caches/kernels outside any window
            backend.generate([build_request(row, candidate, inp.data_dir) for _, row in batch.head(2).iterrows()])
        for batch in batches:
            requests = [build_request(row, candidate, inp.data_dir) for _, row in batch.iterrows()]
            with meter.window() as box:
                started = time.perf_counter()
                results = backend.generate(requests)
            measurement = box[0]
            shares = attribute_window(measurement, [r.input_tokens for r in results],
                                      [r.output_tokens for r in results], idle_w, inp.energy.prefill_weight)
            rows = [_row(row, candidate, backend, res, share, measurement, idle_w, len(batch), run_id,
                         inp.energy.prefill_weight)
                    for (_, row), res, share in zip(batch.iterrows(), results, shares)]
            store.write(key, rows)
            logger.debug("batch of %d in %.2fs", len(batch), time.perf_counter() - started)
            tick(len(batch))
    finally:
        backend.close()


def _row(row, candidate, backend, res, share, measurement, idle_w, batch_size, run_id, prefill_weight) -> dict:
    grade = get_task(row["task"]).grade_row(res.text, row)
    rule = attribution_rule(prefill_weight)
    energy_j, energy_net_j = share
    return {
        "query_id": row["query_id"], "candidate_id": candidate.candidate_id, "task": row["task"],
        "split": row["split"], "correct": int(grade.correct), "invalid": int(grade.invalid),
        "extracted_answer": grade.extracted, "output_text": res.text,
        "input_tokens": int(res.input_tokens), "output_tokens": int(res.output_tokens),
        "batch_size": int(batch_size), "latency_s": float(res.latency_s),
        "ttft_s": None if res.ttft_s is None else float(res.ttft_s),
        "energy_j": float(energy_j), "energy_net_j": float(energy_net_j), "idle_power_w": float(idle_w),
        "avg_power_w": float(measurement.avg_power_w), "energy_source": measurement.source,
        "energy_attribution": rule, "window_s": float(measurement.time_s),
        "model_id": backend.model_id, "backend": backend.name, "run_id": run_id,
    }


def _check_complete(profile: pd.DataFrame, queries: pd.DataFrame, pool) -> None:
    dupes = profile.duplicated(["query_id", "candidate_id"]).sum()
    expected = len(queries) * len(pool)
    if dupes or len(profile) != expected:
        raise RuntimeError(f"tournament shards hold {len(profile)} rows ({dupes} duplicates); expected {expected}")


def _seed(seed: int) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
