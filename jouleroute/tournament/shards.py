"""Crash-safe shard store for the tournament.

Each finished batch is written as its own parquet file, atomically and fsynced
(``jouleroute.atomic``), so a ``kill -9`` or a lost Dask worker can lose at most
the batch in flight. A shard's name is a hash of its query ids, so writing the
same batch twice (a rescheduled task) replaces the file instead of adding rows.

Every shard carries, in its parquet metadata, the config hash it was computed
under and who computed it (worker, device, meter). On resume each shard is
checked (readable, the profile schema, its name matches its query ids, its
config hash); a bad one is moved to ``_quarantine/`` with a warning naming it, and
its pairs are computed again. A corrupt ``state.json`` is moved aside the same
way; the shards' own config hashes then say which of them can be kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jouleroute.atomic import atomic_write_table, atomic_write_text
from jouleroute.schema import PROFILE_SCHEMA

logger = logging.getLogger(__name__)

_STATE_FILE = "state.json"
QUARANTINE = "_quarantine"
_META_KEY = b"jouleroute.shard"


def shard_name(query_ids: list[str]) -> str:
    """A batch's file stem: the same batch always gets the same name."""
    return hashlib.sha1("\n".join(query_ids).encode()).hexdigest()[:16]


@dataclass
class Shard:
    path: Path
    pairs: list[tuple[str, str]]
    meta: dict


class ShardStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.config_hash: str | None = None
        self.vouched = False  # the state file on disk named this config: shards without metadata can stay

    # -- run state: fixes the config a set of shards belongs to ----------------
    def open(self, config_hash: str) -> dict:
        """Return the saved run state for ``config_hash``; shards of another config are cleared.

        A state file that cannot be parsed is quarantined (warning); the shards then
        prove their own config through their metadata in ``scan``.
        """
        self.config_hash = config_hash
        state_path = self.root / _STATE_FILE
        state = None
        if state_path.exists():
            try:
                state = json.loads(state_path.read_text())
                if not isinstance(state, dict) or "config_hash" not in state:
                    raise ValueError("no config_hash")
            except (ValueError, UnicodeDecodeError) as error:
                self.quarantine(state_path, f"unreadable run state ({error})")
                state = None
        if state is not None and state.get("config_hash") != config_hash:
            shutil.rmtree(self.root)  # shards of a different backend/meter: not comparable
            state = None
        self.vouched = state is not None
        if state is None:
            state = {"config_hash": config_hash}
        self.root.mkdir(parents=True, exist_ok=True)
        self.save_state(state)
        return state

    def save_state(self, state: dict) -> None:
        atomic_write_text(self.root / _STATE_FILE, json.dumps(state, indent=2, sort_keys=True))

    def quarantine(self, path: Path, reason: str) -> Path:
        """Move a bad file aside (never delete evidence) and say which one and why."""
        target_dir = self.root / QUARANTINE
        target_dir.mkdir(parents=True, exist_ok=True)
        rel = path.relative_to(self.root)
        target = target_dir / f"{'__'.join(rel.parts)}.{time.strftime('%Y%m%dT%H%M%S')}"
        path.replace(target)
        logger.warning("tournament: %s is corrupt (%s); moved to %s, its pairs will be computed again",
                       path, reason, target)
        return target

    # -- shards: one folder per candidate *version* (id + hash of its spec) ---
    # Changing one candidate's spec recomputes only that candidate.
    def shard_files(self, candidate_keys: list[str] | None = None) -> list[Path]:
        if candidate_keys is None:
            candidate_keys = [d.name for d in self.root.iterdir() if d.is_dir() and d.name != QUARANTINE]
        return sorted(f for k in candidate_keys if (self.root / k).is_dir() for f in (self.root / k).glob("*.parquet"))

    def prune(self, keep_keys: list[str]) -> None:
        """Remove shards of candidate versions no longer in the pool, and temp files of killed writes."""
        for d in self.root.iterdir():
            if d.is_dir() and d.name not in keep_keys and d.name != QUARANTINE:
                shutil.rmtree(d)
        for tmp in [*self.root.glob(".*.tmp"), *self.root.glob("*/.*.tmp")]:
            tmp.unlink(missing_ok=True)

    def scan(self, candidate_keys: list[str]) -> list[Shard]:
        """Read back every shard, quarantining the ones that fail a check.

        Shards written before shards carried metadata are kept only while the state
        file vouches for their config.
        """
        shards = []
        for path in self.shard_files(candidate_keys):
            try:
                shard, _ = _read_shard(path)
                problem = shard_problem(shard, self.vouched, self.config_hash)
            except (OSError, pa.ArrowException, ValueError) as error:
                problem = f"unreadable: {type(error).__name__}: {error}"
            if problem:
                self.quarantine(path, problem)
            else:
                shards.append(shard)
        return shards

    def done_pairs(self, candidate_keys: list[str]) -> set[tuple[str, str]]:
        return {pair for shard in self.scan(candidate_keys) for pair in shard.pairs}

    def path_for(self, candidate_key: str, query_ids: list[str]) -> Path:
        return self.root / candidate_key / f"{shard_name(query_ids)}.parquet"

    def write(self, candidate_key: str, rows: list[dict], meta: dict | None = None) -> Path:
        """Write one batch's rows; ``meta`` (who/where/which meter) is stored with the config hash."""
        table = pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA)
        blob = json.dumps({**(meta or {}), "config_hash": self.config_hash}, sort_keys=True, default=str)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META_KEY: blob.encode()})
        path = self.path_for(candidate_key, [r["query_id"] for r in rows])
        atomic_write_table(table, path)
        return path

    def read_valid(self, candidate_keys: list[str], config_hash: str) -> list[tuple[Shard, pa.Table]]:
        """Read-only: the shards computed under ``config_hash`` and their rows, for a reader that does not own
        this store (GRPO's live rollouts read the tournament's; the tournament reads the live-pair cache).
        Nothing is cleared or moved: a shard that fails a check is skipped with a warning."""
        state_path = self.root / _STATE_FILE
        try:
            vouched = json.loads(state_path.read_text()).get("config_hash") == config_hash
        except (OSError, ValueError, AttributeError):
            vouched = False
        found = []
        for path in self.shard_files(candidate_keys) if self.root.is_dir() else []:
            try:
                shard, rows = _read_shard(path)
                problem = shard_problem(shard, vouched, config_hash)
            except (OSError, pa.ArrowException, ValueError) as error:
                problem = f"unreadable: {type(error).__name__}: {error}"
            if problem:
                logger.warning("%s: skipped (%s)", path, problem)
                continue
            found.append((shard, rows))
        return found

    def read_all(self, candidate_keys: list[str]) -> pd.DataFrame:
        files = self.shard_files(candidate_keys)
        if not files:
            return PROFILE_SCHEMA.empty_table().to_pandas()
        table = pa.concat_tables([pq.read_table(p, schema=PROFILE_SCHEMA) for p in files])
        return table.to_pandas()


def _read_shard(path: Path) -> tuple[Shard, pa.Table]:
    """The shard's pairs and metadata, and its rows (read once, every column: a truncated column chunk fails here,
    not later; the columns are the profile schema's or this raises)."""
    table = pq.read_table(path)
    if [(f.name, f.type) for f in table.schema] != [(f.name, f.type) for f in PROFILE_SCHEMA]:
        raise ValueError("columns differ from the profile schema")
    raw = (table.schema.metadata or {}).get(_META_KEY)
    meta = json.loads(raw) if raw else {}
    pairs = list(zip(table.column("query_id").to_pylist(), table.column("candidate_id").to_pylist()))
    return Shard(path, pairs, meta), table


def shard_problem(shard: Shard, trusted_legacy: bool, config_hash: str | None) -> str | None:
    """Why ``shard`` cannot be used under ``config_hash`` (None: it can). ``trusted_legacy``: a shard without
    metadata (written before shards carried it) is vouched for by the store's run state."""
    query_ids = [q for q, _ in shard.pairs]
    if not query_ids:
        return "no rows"
    if shard_name(query_ids) != shard.path.stem:
        return "its rows do not match its name"
    if not shard.meta:
        return None if trusted_legacy else "no metadata and no run state to vouch for it"
    if shard.meta.get("config_hash") != config_hash:
        return f"computed under config {shard.meta.get('config_hash')}, not {config_hash}"
    return None


def read_shard_meta(path: Path) -> dict:
    raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
    return json.loads(raw) if raw else {}


def write_profile(frame: pd.DataFrame, path: Path) -> None:
    """Write a profile with the explicit schema, atomically and fsynced."""
    table = pa.Table.from_pandas(frame[list(PROFILE_SCHEMA.names)], schema=PROFILE_SCHEMA, preserve_index=False)
    atomic_write_table(table, path)
