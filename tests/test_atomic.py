"""Atomic writes: a failed write leaves the old file whole and no temp file behind."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jouleroute.atomic import atomic_path, atomic_write_table, atomic_write_text


def test_a_write_that_fails_midway_keeps_the_old_file(tmp_path):
    target = tmp_path / "state.json"
    atomic_write_text(target, '{"old": 1}')
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text('{"new": ')  # torn
            raise RuntimeError("killed here")
    assert target.read_text() == '{"old": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_table_write_replaces_and_keeps_metadata(tmp_path):
    target = tmp_path / "sub" / "t.parquet"
    table = pa.table({"x": [1, 2]}).replace_schema_metadata({b"k": b"v"})
    atomic_write_table(table, target)
    atomic_write_table(table.slice(0, 1), target)
    back = pq.read_table(target)
    assert back.num_rows == 1 and back.schema.metadata[b"k"] == b"v"
    assert [p.name for p in target.parent.iterdir()] == ["t.parquet"]
