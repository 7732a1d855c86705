"""Crash-safe shard store for the tournament.

Each finished batch is written as its own parquet file, atomically (temp file,
then ``os.replace``), so a ``kill -9`` can lose at most the batch in flight and
never leaves a half-written shard. On restart the done (query_id, candidate_id)
pairs are read back and skipped, so no pair is computed or stored twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jouleroute.schema import PROFILE_SCHEMA

_STATE_FILE = "state.json"


class ShardStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    # -- run state: fixes the config a set of shards belongs to ----------------
    def open(self, config_hash: str) -> dict:
        """Return the saved run state for ``config_hash``; stale shards of another config are cleared."""
        state_path = self.root / _STATE_FILE
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if state.get("config_hash") == config_hash:
                return state
            shutil.rmtree(self.root)  # shards of a different pool/query set: not resumable
        self.root.mkdir(parents=True, exist_ok=True)
        state = {"config_hash": config_hash}
        self.save_state(state)
        return state

    def save_state(self, state: dict) -> None:
        _atomic_write_bytes(self.root / _STATE_FILE, json.dumps(state, indent=2, sort_keys=True).encode())

    # -- shards: one folder per candidate *version* (id + hash of its spec) ---
    # Changing one candidate's spec recomputes only that candidate.
    def shard_files(self, candidate_keys: list[str] | None = None) -> list[Path]:
        dirs = [self.root / k for k in candidate_keys] if candidate_keys is not None else sorted(self.root.iterdir())
        return sorted(f for d in dirs if d.is_dir() for f in d.glob("*.parquet"))

    def prune(self, keep_keys: list[str]) -> None:
        """Remove shards of candidate versions no longer in the pool."""
        for d in self.root.iterdir():
            if d.is_dir() and d.name not in keep_keys:
                shutil.rmtree(d)

    def done_pairs(self, candidate_keys: list[str]) -> set[tuple[str, str]]:
        done: set[tuple[str, str]] = set()
        for path in self.shard_files(candidate_keys):
            table = pq.read_table(path, columns=["query_id", "candidate_id"])
            done.update(zip(table.column("query_id").to_pylist(), table.column("candidate_id").to_pylist()))
        return done

    def write(self, candidate_key: str, rows: list[dict]) -> Path:
        table = pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA)
        key = hashlib.sha1("\n".join(r["query_id"] for r in rows).encode()).hexdigest()[:16]
        path = self.root / candidate_key / f"{key}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path

    def read_all(self, candidate_keys: list[str]) -> pd.DataFrame:
        files = self.shard_files(candidate_keys)
        if not files:
            return PROFILE_SCHEMA.empty_table().to_pandas()
        table = pa.concat_tables([pq.read_table(p, schema=PROFILE_SCHEMA) for p in files])
        return table.to_pandas()


def _atomic_write_bytes(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)


def write_profile(frame: pd.DataFrame, path: Path) -> None:
    """Write a profile with the explicit schema, atomically."""
    table = pa.Table.from_pandas(frame[list(PROFILE_SCHEMA.names)], schema=PROFILE_SCHEMA, preserve_index=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
