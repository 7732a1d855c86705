"""Outcome tables from pools we have never seen (jouleroute/replay/importer.py): what the importer accepts would
pass validate, and what it refuses it names by file, row (and line) and field. Found by a review that fed it tables
the way other pools ship them; each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from jouleroute.replay import OutcomeTableError
from tests.replay.test_importer import GOOD_ROWS, _cfg, _run, _write

MEASURED = {"energy_j": 5.0, "energy_source": "measured-nvml", "latency_s": 0.5}


@pytest.mark.parametrize(("rows", "expected"), [
    (GOOD_ROWS[:3], r"row 2 \(line 3\) field 'candidate': query_id 'q2' has no row for candidate\(s\) \['big'\]"),
    ([dict(GOOD_ROWS[0], invalid=1), *GOOD_ROWS[1:]], r"row 0 \(line 1\) field 'correct': is 1 but invalid is 1"),
    ([dict(GOOD_ROWS[0], candidate="small\n"), *GOOD_ROWS[1:]], r"row 0 \(line 1\) field 'candidate'"),
    ([dict(GOOD_ROWS[0], energy_source="measured-nvml"), *GOOD_ROWS[1:]],
     r"row 0 \(line 1\) field 'energy_j': is empty but energy_source is given"),
    ([dict(r, **MEASURED, ttft_s=9.0) for r in GOOD_ROWS], r"row 0 \(line 1\) field 'ttft_s': 9 s is after"),
    ([dict(GOOD_ROWS[0], **MEASURED), *GOOD_ROWS[1:]],
     r"different energy sources \['measured-nvml', 'modelled'\] \(measured-nvml: first at .*row 0 \(line 1\); "
     r"modelled: first at .*row 1 \(line 2\) field 'energy_j'"),
    ([dict(r, split="test" if i == 0 else None) for i, r in enumerate(GOOD_ROWS)],
     r"row 1 \(line 2\) field 'split': differs from .*row 0"),
])
def test_a_row_the_pipeline_would_refuse_later_is_refused_at_import(fake_ref, tmp_path: Path, repo_root: Path, rows,
                                                                      expected) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows))
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, path), tmp_path, repo_root)


def test_empty_split_cells_take_the_hash_default_as_documented(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    path = _write([dict(r, split="") for r in GOOD_ROWS], tmp_path / "t.csv")
    summary, profile = _run(_cfg(fake_ref, path), tmp_path, repo_root)
    assert summary["queries"] == 2 and set(profile["split"]) <= {"train", "val", "test"}


def test_nullable_parquet_columns_and_json_numbers_import(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    """pandas' nullable Int64/string columns (pd.NA) and a JSON gold of 42 beside nulls (read as 42.0)."""
    frame = pd.DataFrame(GOOD_ROWS).assign(gold=[42, 42, None, None])
    frame["input_tokens"] = pd.array([10, 10, None, None], dtype="Int64")  # counted from the prompt where empty
    frame["output_text"] = frame["output_text"].astype("string")
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False)
    _, profile = _run(_cfg(fake_ref, path), tmp_path, repo_root)
    queries = pd.read_parquet(tmp_path / "out" / "queries.parquet").set_index("query_id")
    assert queries.loc["q1", "gold"] == "42" and queries.loc["q2", "gold"] == ""
    assert (profile["input_tokens"] > 0).all()


def test_csv_errors_name_the_real_line_and_a_trailing_comma_shifts_nothing(fake_ref, tmp_path: Path,
                                                                           repo_root: Path) -> None:
    rows = [dict(r, prompt=r["prompt"] + "\nsecond line\nthird") for r in GOOD_ROWS]
    rows[3]["correct"] = "maybe"
    path = _write(rows, tmp_path / "t.csv")
    with pytest.raises(OutcomeTableError, match=r"row 3 \(line 11\) field 'correct'"):  # 3 lines per record
        _run(_cfg(fake_ref, path), tmp_path, repo_root)
    header = ",".join(GOOD_ROWS[0])
    body = "".join(",".join(str(v) for v in r.values()) + ",\n" for r in GOOD_ROWS)  # a trailing comma each
    (tmp_path / "comma.csv").write_text(header + "\n" + body)
    summary, profile = _run(_cfg(fake_ref, tmp_path / "comma.csv"), tmp_path, repo_root)
    assert summary["candidates"] == ["big", "small"] and set(profile["query_id"]) == {"q1", "q2"}
    (tmp_path / "extra.csv").write_text(header + "\n" + body.replace("4,\n", "4,surplus\n", 1))
    with pytest.raises(OutcomeTableError, match=r"extra\.csv line 2: 9 fields where the header names 8 columns"):
        _run(_cfg(fake_ref, tmp_path / "extra.csv"), tmp_path, repo_root)


def test_an_unknown_energy_reference_is_one_line_from_the_cli(tmp_path: Path, repo_root: Path) -> None:
    """`jouleroute import` with a models entry naming no ML.ENERGY model (it printed a traceback)."""
    import subprocess
    import sys

    import yaml

    path = _write(GOOD_ROWS, tmp_path / "t.csv")
    models = {c: {"reference": "nobody/no-such-model", "reason": "test"} for c in ("small", "big")}
    params = {"profile_source": "import_outcomes", "tracking": {"enabled": False},
              "paths": {"queries": str(tmp_path / "q.parquet"), "profile": str(tmp_path / "p.parquet")},
              "import_outcomes": {"input_file": str(path), "source_name": "mine", "models": models}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    done = subprocess.run([sys.executable, "-m", "jouleroute", "--params", str(tmp_path / "p.yaml"), "import"],
                          cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("jouleroute import: data error: ") and "ML.ENERGY" in last, last
