"""Atomic, durable file writes: a reader (or a rerun after ``kill -9`` or a power cut)
sees either the old file or the complete new one, never a torn write.

The recipe: write a uniquely named temp file in the same folder, flush and
``fsync`` it, ``os.replace`` it over the target, then ``fsync`` the folder so the
rename itself survives a crash. Temp names end in ``.tmp`` (ignored by git, and
never matched by the ``*.parquet`` globs that read shards back).
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write to; on success it replaces ``path`` durably, on error it is removed.

    For writers that only take a path (``DataFrame.to_parquet``, ``save_pretrained``...)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as handle:  # the writer may not have fsynced
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, blob: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(blob)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_table(table: pa.Table, path: str | Path) -> None:
    """Write a parquet table (schema and key-value metadata included) atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
