"""Stage function ``run_import``: a user's own outcome table as a profile, like the replay's.

Rows that carry energy (energy_j + energy_source + latency_s) keep it as given; the
others are modelled from the candidate's entry in ``import_outcomes.models``, exactly as
the RouterBench replay is (docs/replay.md). Two energy sources in one profile are an
error unless ``allow_mixed_sources`` (params ``energy_policy``) says they are wanted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.paths import relative_to
from jouleroute.replay.config import ImportConfig
from jouleroute.replay.energy_model import build_token_model
from jouleroute.replay.outcome_table import (
    OPTIONAL_COLUMNS, REQUIRED_COLUMNS, OutcomeTable, OutcomeTableError, check_candidates, check_same_per_query,
    check_complete_pool, check_unique_pairs, expected_correct, flags, numbers, read_outcome_table, texts,
)  # fmt: skip
from jouleroute.replay.stage import config_run_id
from jouleroute.replay.tables import hash_fraction, pool_summary, price_modelled, write_outputs
from jouleroute.replay.tokens import count_tokens, load_tokenizer
from jouleroute.schema import ENERGY_SOURCES, SPLITS

log = logging.getLogger(__name__)


def _splits(table: OutcomeTable, query_ids: list[str], cfg: ImportConfig) -> list[str]:
    """The given split, or where a query's cells are all empty (or the column absent) a stable hash of the query id
    (test first, then val); a query with a split on some rows and none on others is an error (check_same_per_query)."""
    given = texts(table, "split", required=False)
    for row, split in enumerate(given):
        if split is not None and split not in SPLITS:
            raise table.fail(row, "split", f"expected one of {SPLITS}, got {split!r}")
    named = {q for q, split in zip(query_ids, given) if split is not None}
    test, val = cfg.test_fraction, cfg.test_fraction + cfg.val_fraction
    hashed = lambda q: (lambda f: "test" if f < test else "val" if f < val else "train")(hash_fraction(q))  # noqa: E731
    return [split if split is not None else None if q in named else hashed(q) for q, split in zip(query_ids, given)]


def _token_counts(
    table: OutcomeTable, column: str, text_column: str, tokenizer_file: Path
) -> tuple[np.ndarray, list[bool]]:
    """Given counts where present, else counted from the text; a row with neither is an error."""
    given = numbers(table, column, int, 0, strict=False)
    text = texts(table, text_column, required=False)
    need = [row for row, n in enumerate(given) if n is None]
    counted_rows = [n is None for n in given]
    for row in need:
        if text[row] is None:
            raise table.fail(row, column, f"is empty and so is '{text_column}': give the count or the text")
    if need:
        counted = count_tokens(load_tokenizer(tokenizer_file), [str(text[row]) for row in need])
        for row, n in zip(need, counted):
            given[row] = int(n)
    return np.asarray(given, dtype=np.int64), counted_rows


def _measured_energy(table: OutcomeTable) -> tuple[list[float | None], list[str | None], list[float | None]]:
    energy = numbers(table, "energy_j", float, 0, strict=True)
    sources = texts(table, "energy_source", required=False)
    latency = numbers(table, "latency_s", float, 0, strict=True)
    for row, joules in enumerate(energy):
        if joules is None:
            given = [c for c, v in (("energy_source", sources[row]), ("latency_s", latency[row])) if v is not None]
            if given:  # a measurement without its joules would be silently modelled over
                raise table.fail(row, "energy_j", f"is empty but {' and '.join(given)} is given: give the measured "
                                 "energy_j, or leave the row's energy columns all empty to have it modelled")
            continue
        if sources[row] not in ENERGY_SOURCES:
            expected = f"expected one of {ENERGY_SOURCES} with energy_j, got {sources[row]!r}"
            raise table.fail(row, "energy_source", expected)
        if latency[row] is None:
            raise table.fail(row, "latency_s", "is empty; rows with measured energy_j need their latency_s")
    return energy, sources, latency


def _query_fields(table: OutcomeTable, query_ids: list, cfg: ImportConfig) -> tuple[dict[str, list], list[str]]:
    """The per-query columns and the split, checked to agree on every row of a query."""
    per_query = {
        "task": texts(table, "task", required=True),
        "prompt": texts(table, "prompt", required=True),
        "subtask": texts(table, "subtask", required=False, default=""),
        "gold": texts(table, "gold", required=False, default=""),
        "choices_json": texts(table, "choices_json", required=False, default="[]"),
    }
    for row, choices in enumerate(per_query["choices_json"]):
        try:
            ok = isinstance(json.loads(str(choices)), list)
        except json.JSONDecodeError:
            ok = False
        if not ok:
            raise table.fail(row, "choices_json", f"expected a JSON list, got {choices!r}")
    splits = _splits(table, query_ids, cfg)
    for column, values in {**per_query, "split": splits}.items():
        check_same_per_query(table, query_ids, column, values)
    return per_query, splits


def _token_models_for(table: OutcomeTable, candidates: list, energy: list, cfg: ImportConfig, repo_root: Path) -> dict:
    """candidate -> token model, for the candidates of rows without energy; a row with neither is an error."""
    modelled = [row for row, joules in enumerate(energy) if joules is None]
    for row in modelled:
        if candidates[row] not in cfg.models:
            raise table.fail(
                row, "energy_j",
                f"is empty and candidate {candidates[row]!r} has no energy reference; give measured energy_j, "
                f"energy_source and latency_s, or add import_outcomes.models.{candidates[row]} (docs/replay.md)",
            )  # fmt: skip
    return {
        c: build_token_model(cfg.models[c], cfg.energy, repo_root, f"import_outcomes.models.{c}")
        for c in sorted({candidates[row] for row in modelled})
    }


def _as_recorded(
    table: OutcomeTable, rows: pd.DataFrame, energy: list, sources: list, latency: list
) -> pd.DataFrame:
    """Profile columns for rows whose energy the table gives: kept as given, with their own label."""
    if rows.empty:
        return rows
    ttft = numbers(table, "ttft_s", float, 0, strict=False)
    batch = numbers(table, "batch_size", int, 0, strict=True)
    index = rows.index
    late = next((r for r in index if ttft[r] is not None and ttft[r] > latency[r]), None)
    if late is not None:
        raise table.fail(late, "ttft_s", f"{ttft[late]:g} s is after the whole answer (latency_s {latency[late]:g} s)")
    out = rows.assign(
        energy_j=[energy[r] for r in index], latency_s=[latency[r] for r in index],
        ttft_s=[ttft[r] for r in index], batch_size=[batch[r] or 1 for r in index],
        energy_source=[sources[r] for r in index], energy_attribution="as-recorded", idle_power_w=0.0,
    )  # fmt: skip
    out["energy_net_j"] = out["energy_j"]  # the table gives raw energy only
    out["avg_power_w"] = out["energy_j"] / out["latency_s"]
    out["window_s"] = out["latency_s"]
    return out


def _provenance(
    profile: pd.DataFrame, rel: str, token_models: dict, recorded_source: list, counted: list[bool], tokenizer: str
) -> pd.DataFrame:
    """One sidecar row per profile row (the profile's index is the table's row number)."""
    rows = profile.index.tolist()
    models = [None if recorded_source[r] else token_models[c] for r, c in zip(rows, profile["candidate_id"])]
    return pd.DataFrame(
        {
            "query_id": profile["query_id"], "candidate_id": profile["candidate_id"], "source_file": rel,
            "source_row": np.asarray(rows, dtype=np.int64), "source_field": "correct",
            "energy_reference": [
                m.reference if m else f"as recorded ({recorded_source[r]})" for m, r in zip(models, rows)
            ],
            "energy_reference_file": [m.reference_file if m else rel for m in models],
            "tokenizer_file": [tokenizer if counted[r] else "" for r in rows],
        }
    )  # fmt: skip


def _queries(query_ids: list, splits: list, per_query: dict, rel: str) -> pd.DataFrame:
    """The query table: each query described by the first row that names it (all rows agree, checked)."""
    first_row = pd.Series(range(len(query_ids))).groupby(pd.Series(query_ids)).min()
    return pd.DataFrame(
        {
            "query_id": first_row.index, "source_row": first_row.to_numpy(dtype=np.int64), "source_file": rel,
            "split": [splits[r] for r in first_row], "question": [per_query["prompt"][r] for r in first_row],
            **{c: [per_query[c][r] for r in first_row] for c in ("task", "subtask", "gold", "choices_json")},
        }
    )  # fmt: skip


def run_import(cfg: ImportConfig, repo_root: Path, queries_out: Path, profile_out: Path,
               allow_mixed_sources: bool = False) -> dict:
    """Write query table, profile and provenance sidecar from ``cfg.input_file``; return a summary."""
    started = time.perf_counter()
    path = repo_root / cfg.input_file
    table = read_outcome_table(path)
    ignored = [c for c in table.frame.columns if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if ignored:
        log.warning("%s: ignoring columns not in the import schema: %s", path, ignored)

    query_ids = texts(table, "query_id", required=True)
    candidates = texts(table, "candidate", required=True)
    check_candidates(table, candidates)
    check_unique_pairs(table, query_ids, candidates)
    check_complete_pool(table, query_ids, candidates)
    per_query, splits = _query_fields(table, query_ids, cfg)

    tokenizer_file = repo_root / cfg.energy.tokenizer_file
    input_tokens, counted_in = _token_counts(table, "input_tokens", "prompt", tokenizer_file)
    output_tokens, counted_out = _token_counts(table, "output_tokens", "output_text", tokenizer_file)
    energy, sources, latency = _measured_energy(table)

    token_models = _token_models_for(table, candidates, energy, cfg, repo_root)
    modelled_rows = [row for row, joules in enumerate(energy) if joules is None]
    for row in modelled_rows:
        if input_tokens[row] + output_tokens[row] == 0:
            raise table.fail(row, "input_tokens", "a modelled request needs tokens, but input and output are both 0")

    correct, invalid = expected_correct(table, "correct"), flags(table, "invalid", default=0)
    wrong = next((row for row, (c, i) in enumerate(zip(correct, invalid)) if i and c > 0), None)
    if wrong is not None:  # validate's rule, told here with the row
        raise table.fail(wrong, "correct", f"is {correct[wrong]:g} but invalid is 1: an invalid answer is never "
                         "correct (set correct to 0, or invalid to 0)")
    file_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    run_id = config_run_id(f"import-{cfg.source_name}", cfg.model_dump_json() + file_sha)
    profile = pd.DataFrame(
        {
            "query_id": query_ids, "candidate_id": candidates, "task": per_query["task"], "split": splits,
            "correct": np.asarray(correct, dtype=np.float64),  # an expectation in [0, 1]
            "invalid": np.asarray(invalid, dtype=np.int8),
            "extracted_answer": texts(table, "extracted_answer", required=False),
            "output_text": texts(table, "output_text", required=False),
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "model_id": [m or c for m, c in zip(texts(table, "model", required=False), candidates)],
            "backend": f"import:{cfg.source_name}", "run_id": run_id,
        }
    )  # fmt: skip
    modelled = price_modelled(profile.iloc[modelled_rows], token_models)
    measured = _as_recorded(table, profile.drop(index=modelled_rows), energy, sources, latency)
    profile = pd.concat([p for p in (modelled, measured) if not p.empty]).sort_index()

    used_sources = sorted(profile["energy_source"].unique())
    if len(used_sources) > 1 and not allow_mixed_sources:
        firsts = "; ".join(f"{s}: first at {table.where(int(profile.index[profile['energy_source'] == s][0]))}"
                           + (" field 'energy_j' (empty, so modelled)" if s == "modelled" else "") for s in used_sources)
        raise OutcomeTableError(
            f"{path}: rows carry different energy sources {used_sources} ({firsts}); set "
            "energy_policy.allow_mixed_sources to true if that is intended (evaluation then compares energies of "
            "different kinds)"
        )

    rel = relative_to(path, repo_root)
    counted = [i or o for i, o in zip(counted_in, counted_out)]
    sources_of = [None if e is None else s for e, s in zip(energy, sources)]
    provenance = _provenance(profile, rel, token_models, sources_of, counted, relative_to(tokenizer_file, repo_root))
    queries = _queries(query_ids, splits, per_query, rel)
    sidecar = write_outputs(queries, profile, provenance, queries_out, profile_out, f"import ({path})")
    seconds = time.perf_counter() - started
    log.info("imported %d rows (%d queries) from %s in %.1f s", len(profile), len(queries), path, seconds)
    return {
        "rows": len(profile), "queries": len(queries), "candidates": sorted(set(candidates)),
        "queries_per_split": queries["split"].value_counts().sort_index().to_dict(),
        "energy_sources": used_sources, "modelled_rows": len(modelled_rows), "ignored_columns": ignored,
        "pool": pool_summary(profile),
        "provenance_path": str(sidecar), "run_id": run_id, "seconds": seconds,
    }  # fmt: skip
