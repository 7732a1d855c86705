"""Shared assembly of replayed outcomes into the project's query, profile and provenance tables.

Both sources (RouterBench and a user's own table) end in the same long frame of
outcomes; this module prices the modelled rows, fills the PROFILE_SCHEMA columns,
checks what the validate stage will check, and writes parquet with explicit schemas.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from jouleroute.atomic import atomic_write_table
from jouleroute.schema import ENERGY_SOURCES, PROFILE_SCHEMA, QUERY_SCHEMA, SPLITS, profile_schema

if TYPE_CHECKING:  # types only: energy_model is the lower module
    from jouleroute.replay.energy_model import TokenEnergyModel

MODELLED = "modelled"
MODELLED_ATTRIBUTION = "modelled-per-token"  # energy_j = in_tok * J_in + out_tok * J_out (docs/replay.md)

# Sidecar: where every profile row came from. Keyed by (query_id, candidate_id), like the profile.
PROVENANCE_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),  # repo-relative outcome file
        pa.field("source_row", pa.int64(), nullable=False),  # 0-based data row (header excluded)
        pa.field("source_field", pa.string(), nullable=False),  # column holding the correctness
        pa.field("energy_reference", pa.string(), nullable=False),  # what the energy was modelled from
        pa.field("energy_reference_file", pa.string(), nullable=False),
        pa.field("tokenizer_file", pa.string(), nullable=False),  # what counted the tokens ("" if given)
    ]
)


def hash_fraction(key: str) -> float:
    """A stable number in [0, 1) for a key: the same split on every machine and Python version."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def carve_val(query_ids: pd.Series, splits: pd.Series, val_fraction: float) -> pd.Series:
    """Move the train queries whose id hashes below ``val_fraction`` to val; test is never touched."""
    to_val = (splits == "train") & query_ids.map(hash_fraction).lt(val_fraction)
    return splits.where(~to_val, "val")


def price_modelled(outcomes: pd.DataFrame, models: Mapping[str, "TokenEnergyModel"]) -> pd.DataFrame:
    """Fill energy/latency columns of rows priced by a token model, one model per candidate_id.

    ``outcomes`` needs candidate_id, input_tokens and output_tokens.
    """
    out = outcomes.copy()
    for column in ("energy_j", "ttft_s", "latency_s"):
        out[column] = np.nan
    out["batch_size"] = 0
    for candidate_id, model in models.items():
        rows = out["candidate_id"] == candidate_id
        priced = model.requests(out.loc[rows, "input_tokens"].to_numpy(), out.loc[rows, "output_tokens"].to_numpy())
        for column, values in priced.items():
            out.loc[rows, column] = values
        out.loc[rows, "batch_size"] = model.batch_size
    out["energy_net_j"] = out["energy_j"]  # idle power is 0 by convention: the model is steady-state active energy
    out["idle_power_w"] = 0.0
    out["avg_power_w"] = out["energy_j"] / out["latency_s"]  # modelled, attributed to the request
    out["energy_source"] = MODELLED
    out["energy_attribution"] = MODELLED_ATTRIBUTION
    out["window_s"] = out["latency_s"]
    return out


def _where(frame: pd.DataFrame, mask: pd.Series, limit: int = 5) -> str:
    rows = frame.loc[mask, ["query_id", "candidate_id"]].head(limit)
    return "; ".join(f"({q}, {c})" for q, c in rows.itertuples(index=False))


def check_profile(profile: pd.DataFrame, what: str) -> None:
    """The invariants the validate stage checks, raised here first with the offending rows named."""
    missing = [c for c in PROFILE_SCHEMA.names if c not in profile.columns]
    if missing:
        raise ValueError(f"{what}: profile lacks columns {missing}")
    required = [f.name for f in PROFILE_SCHEMA if not f.nullable]
    for column in required:
        if profile[column].isna().any():
            raise ValueError(f"{what}: '{column}' is empty for {_where(profile, profile[column].isna())}")
    for column in ("energy_j", "latency_s"):
        bad = ~(profile[column] > 0)
        if bad.any():
            raise ValueError(f"{what}: '{column}' must be > 0, not for {_where(profile, bad)}")
    dupes = profile.duplicated(["query_id", "candidate_id"], keep=False)
    if dupes.any():
        raise ValueError(f"{what}: (query_id, candidate_id) repeated: {_where(profile, dupes)}")
    unknown = ~profile["energy_source"].isin(ENERGY_SOURCES)
    if unknown.any():
        raise ValueError(f"{what}: energy_source not one of {ENERGY_SOURCES}: {_where(profile, unknown)}")
    correct = pd.to_numeric(profile["correct"], errors="coerce")
    bad_correct = ~correct.between(0.0, 1.0)
    if bad_correct.any():
        raise ValueError(f"{what}: 'correct' must be in [0, 1], not for {_where(profile, bad_correct)}")
    bad_split = ~profile["split"].isin(SPLITS)
    if bad_split.any():
        raise ValueError(f"{what}: split not one of {SPLITS}: {_where(profile, bad_split)}")


def _table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    # Select in schema order and cast explicitly, so dtypes are the contract's, not pandas' guesses.
    arrays = []
    for f in schema:
        column = frame[f.name]
        values = column.astype(object).where(column.notna(), None).tolist()  # NaN -> null, never "nan"
        arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def provenance_path(profile_out: Path) -> Path:
    """The sidecar written next to the profile: ``<stem>.provenance.parquet``."""
    return profile_out.with_name(f"{profile_out.stem}.provenance.parquet")


def write_outputs(
    queries: pd.DataFrame,
    profile: pd.DataFrame,
    provenance: pd.DataFrame,
    queries_out: Path,
    profile_out: Path,
    what: str,
) -> Path:
    """Check and write the three tables; returns the provenance path."""
    check_profile(profile, what)
    profile = profile.sort_values(["query_id", "candidate_id"], kind="stable")
    provenance = provenance.sort_values(["query_id", "candidate_id"], kind="stable")
    queries = queries.sort_values("query_id", kind="stable")
    for path in (queries_out, profile_out):
        path.parent.mkdir(parents=True, exist_ok=True)
    # Atomic and fsynced: a kill mid-write never leaves a torn table that looks complete.
    atomic_write_table(_table(queries, QUERY_SCHEMA), queries_out)
    # int8 0/1 as the tournament writes it; float64 when some correctness is a fraction (schema.py)
    atomic_write_table(_table(profile, profile_schema(profile["correct"])), profile_out)
    sidecar = provenance_path(profile_out)
    atomic_write_table(_table(provenance, PROVENANCE_SCHEMA), sidecar)
    return sidecar


def pool_summary(profile: pd.DataFrame) -> list[dict[str, object]]:
    """Per candidate and split: queries, accuracy, mean energy and latency per query (for logs and reports)."""
    grouped = profile.groupby(["candidate_id", "split"], sort=True)
    table = grouped.agg(
        queries=("query_id", "size"),
        accuracy=("correct", "mean"),
        mean_energy_j=("energy_j", "mean"),
        mean_latency_s=("latency_s", "mean"),
        mean_input_tokens=("input_tokens", "mean"),
        mean_output_tokens=("output_tokens", "mean"),
    )
    return table.reset_index().to_dict(orient="records")
