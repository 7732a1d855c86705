"""Stage function ``run_replay``: RouterBench's real outcomes as a profile with modelled energy.

Correctness is RouterBench's; energy and latency are modelled per request from
ML.ENERGY measurements (energy_source "modelled" on every row); token counts come
from one offline tokenizer. The result has exactly the tournament's PROFILE_SCHEMA
and QUERY_SCHEMA, so router training and evaluation run on it unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import pandas as pd

from jouleroute.paths import relative_to
from jouleroute.replay.config import ReplayConfig
from jouleroute.replay.energy_model import TokenEnergyModel, build_token_model
from jouleroute.replay.routerbench import hold_out_tasks, read_routerbench, routerbench_models
from jouleroute.replay.tables import carve_val, pool_summary, price_modelled, write_outputs
from jouleroute.replay.tokens import count_tokens, load_tokenizer

log = logging.getLogger(__name__)

BACKEND = "replay:routerbench"


def config_run_id(prefix: str, cfg_json: str) -> str:
    """A run id that changes exactly when the config does (so re-running gives identical files)."""
    return f"{prefix}-{hashlib.sha256(cfg_json.encode()).hexdigest()[:12]}"


def _config_json(cfg: ReplayConfig) -> str:
    """The params the run id hashes: what was replayed, not where its files lie (the folders are left out, so
    moving the data root keeps the id; the data's bytes are the manifest's checksums and DVC's deps). An unset
    test_tasks is left out too, so the default replay's id predates that field."""
    exclude: dict = {"source_dir": True, "energy": {"reference_dir": True}}
    if not cfg.test_tasks:
        exclude["test_tasks"] = True
    return cfg.model_dump_json(exclude=exclude)


def token_models(cfg: ReplayConfig, repo_root: Path) -> dict[str, TokenEnergyModel]:
    """candidate_id -> per-token energy/speed for every model in the replay pool."""
    closed = set(cfg.closed_models)
    return {
        entry.candidate_id: build_token_model(
            entry, cfg.energy, repo_root, f"replay.{'closed_models' if name in closed else 'models'}.{name}"
        )
        for name, entry in cfg.pool().items()
    }


def _check_closed_covered(cfg: ReplayConfig, available: list[str]) -> list[str]:
    """Models in the files but not in the pool; with include_closed every one of them must be covered."""
    excluded = [m for m in available if m not in cfg.pool()]
    if cfg.include_closed and excluded:
        raise ValueError(
            f"replay.include_closed is true but these RouterBench models have no entry: {excluded}. Give each a "
            "replay.closed_models entry with user-supplied j_per_output_token, tpot_s, prefill_tokens_per_s and reason."
        )
    return excluded


def run_replay(cfg: ReplayConfig, repo_root: Path, queries_out: Path, profile_out: Path) -> dict:
    """Write the replay query table, profile and ``<profile>.provenance.parquet``; return a summary."""
    started = time.perf_counter()
    pool = cfg.pool()
    # Params errors first (a mapping miss, an uncovered closed model), before the slow reading.
    models = token_models(cfg, repo_root)
    excluded = _check_closed_covered(cfg, routerbench_models(repo_root / cfg.source_dir, cfg.tasks))
    records = read_routerbench(repo_root / cfg.source_dir, cfg.tasks, list(pool), repo_root)
    queries, outcomes = records.queries.copy(), records.outcomes
    if cfg.test_tasks:
        queries, outcomes = hold_out_tasks(queries, outcomes, cfg.test_tasks)

    queries["split"] = carve_val(queries["query_id"], queries["split"], cfg.val_fraction)
    split_of = dict(zip(queries["query_id"], queries["split"]))

    tokenizer_path = repo_root / cfg.energy.tokenizer_file
    tokenizer = load_tokenizer(tokenizer_path)
    prompt_tokens = dict(zip(queries["query_id"], count_tokens(tokenizer, queries["question"].tolist())))

    candidate_of = {name: entry.candidate_id for name, entry in pool.items()}
    profile = pd.DataFrame(
        {
            "query_id": outcomes["query_id"],
            "candidate_id": outcomes["model"].map(candidate_of),
            "task": outcomes["task"],
            "split": outcomes["query_id"].map(split_of),
            "correct": outcomes["correct"],
            "invalid": 0,  # RouterBench scores unparseable answers as wrong and does not flag them
            "extracted_answer": None,  # not recorded upstream
            "output_text": outcomes["output_text"],
            "input_tokens": outcomes["query_id"].map(prompt_tokens).astype("int64"),
            "output_tokens": count_tokens(tokenizer, outcomes["output_text"].tolist()),
            "model_id": outcomes["model"],
            "backend": BACKEND,
            "run_id": config_run_id("replay-routerbench", _config_json(cfg)),
        }
    )
    profile = price_modelled(profile, models)

    tokenizer_rel = relative_to(tokenizer_path, repo_root)
    provenance = pd.DataFrame(
        {
            "query_id": profile["query_id"],
            "candidate_id": profile["candidate_id"],
            "source_file": outcomes["source_file"],
            "source_row": outcomes["source_row"],
            "source_field": outcomes["source_field"],
            "energy_reference": profile["candidate_id"].map({c: m.reference for c, m in models.items()}),
            "energy_reference_file": profile["candidate_id"].map({c: m.reference_file for c, m in models.items()}),
            "tokenizer_file": tokenizer_rel,
        }
    )
    queries_table = queries.assign(subtask="", choices_json="[]", gold="")  # RouterBench records neither
    sidecar = write_outputs(queries_table, profile, provenance, queries_out, profile_out, "replay (RouterBench)")
    seconds = time.perf_counter() - started
    log.info("replayed %d rows (%d queries) in %.1f s", len(profile), len(queries), seconds)
    return {
        "rows": len(profile),
        "queries": len(queries),
        "queries_per_split": queries["split"].value_counts().sort_index().to_dict(),
        "candidates": sorted(models),
        "excluded_models": excluded,
        "dropped_records": records.dropped_records,
        "energy_references": {c: m.reference for c, m in models.items()},
        "energy_source": "modelled",
        "pool": pool_summary(profile),
        "provenance_path": str(sidecar),
        "run_id": profile["run_id"].iloc[0],
        "seconds": seconds,
        **({"test_tasks": list(cfg.test_tasks)} if cfg.test_tasks else {}),
    }
