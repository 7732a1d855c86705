"""scripts/label_quality.py on a profile graded on gold: one table row per labels, scope and task."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.labels.pools import profile

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("label_quality_script", REPO / "scripts/label_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_prints_reference_and_vote_quality_per_task(tmp_path, capsys):
    gold = profile({"big": [1, 2, 9, 4], "small": [1, 5, 3, 4], "mid": [1, 2, 3, 7]}, [1, 2, 3, 4])
    gold.to_parquet(tmp_path / "profile.parquet")
    _script().main(["--profile", str(tmp_path / "profile.parquet"), "--reference", "big",
                    "--json", str(tmp_path / "out.json")])
    printed = capsys.readouterr().out
    assert "4 queries x 3 candidates (big, mid, small)" in printed
    assert "| `reference:big` | without big | gsm8k | 8/8 (4/4) |" in printed
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert [(r["labels"], r["scope"], r["task"]) for r in rows] == [
        ("reference:big", "all candidates", "gsm8k"), ("reference:big", "all candidates", "all"),
        ("reference:big", "without big", "gsm8k"), ("reference:big", "without big", "all"),
        ("vote", "all candidates", "gsm8k"), ("vote", "all candidates", "all")]
    vote = rows[-1]
    assert vote["precision"] == 1.0 and vote["agreement"] == 1.0  # the pool's plurality is right on every query
