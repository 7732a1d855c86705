"""The generic importer on small hand-made tables: the good path in three formats, and each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from jouleroute.replay import EnergyMapping, EnergyModelConfig, ImportConfig, OutcomeTableError, run_import
from jouleroute.replay.tables import provenance_path
from jouleroute.schema import PROFILE_SCHEMA, QUERY_SCHEMA

# Two queries x two candidates, token counts given so the energies can be checked by hand.
GOOD_ROWS = [
    {"query_id": "q1", "task": "arc_challenge", "prompt": "2+2?", "candidate": "small", "correct": 1,
     "input_tokens": 10, "output_tokens": 2, "output_text": "4"},
    {"query_id": "q1", "task": "arc_challenge", "prompt": "2+2?", "candidate": "big", "correct": 1,
     "input_tokens": 10, "output_tokens": 3, "output_text": "4."},
    {"query_id": "q2", "task": "gsm8k", "prompt": "3*3?", "candidate": "small", "correct": 0,
     "input_tokens": 20, "output_tokens": 4, "output_text": "8"},
    {"query_id": "q2", "task": "gsm8k", "prompt": "3*3?", "candidate": "big", "correct": 1,
     "input_tokens": 20, "output_tokens": 1, "output_text": "9"},
]  # fmt: skip


def _write(rows: list[dict], path: Path) -> Path:
    frame = pd.DataFrame(rows)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        frame.to_parquet(path, index=False)
    return path


def _cfg(fake_ref, path: Path, **kw) -> ImportConfig:
    energy = EnergyModelConfig(
        reference_dir=str(fake_ref.root), gpu=fake_ref.gpu, target_batch_size=64, prefill_share=0.5
    )
    models = {c: EnergyMapping(reference=fake_ref.model, reason="test stand-in") for c in ("small", "big")}
    return ImportConfig(input_file=str(path), energy=energy, models=kw.pop("models", models), **kw)


def _run(cfg: ImportConfig, tmp_path: Path, repo_root: Path, **policy) -> tuple[dict, pd.DataFrame]:
    summary = run_import(cfg, repo_root, tmp_path / "out" / "queries.parquet", tmp_path / "out" / "profile.parquet",
                         **policy)
    return summary, pd.read_parquet(tmp_path / "out" / "profile.parquet")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_good_table_gives_the_profile_schema(fake_ref, tmp_path: Path, repo_root: Path, suffix: str) -> None:
    path = _write(GOOD_ROWS, tmp_path / f"outcomes{suffix}")
    summary, profile = _run(_cfg(fake_ref, path), tmp_path, repo_root)
    assert pq.read_schema(tmp_path / "out" / "profile.parquet").remove_metadata() == PROFILE_SCHEMA
    assert pq.read_schema(tmp_path / "out" / "queries.parquet").remove_metadata() == QUERY_SCHEMA
    assert summary["rows"] == 4 and summary["queries"] == 2 and summary["energy_sources"] == ["modelled"]
    row = profile.set_index(["query_id", "candidate_id"]).loc[("q2", "small")]
    # bs64 reference: J_out = 2 J, J_in = 0.5 * 2 = 1 J -> 20*1 + 4*2 = 28 J; ttft = 20 / (1000/0.5) = 0.01 s.
    assert row["energy_j"] == pytest.approx(28.0) and row["latency_s"] == pytest.approx(0.01 + 4 * 0.05)
    assert row["correct"] == 0 and row["energy_source"] == "modelled" and row["batch_size"] == 64
    provenance = pd.read_parquet(provenance_path(tmp_path / "out" / "profile.parquet"))
    assert provenance.set_index(["query_id", "candidate_id"]).loc[("q2", "small"), "source_row"] == 2


def test_a_jsonl_prompt_with_a_unicode_line_separator_stays_one_row(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    """JSON keeps U+2028, U+2029 and U+0085 raw inside a string; a line ends at "\n" only (str.splitlines cut the
    row in two: "not valid JSON")."""
    rows = [dict(r, prompt=r["prompt"] + " \u2028 next\u2029 \x85 end") for r in GOOD_ROWS]
    path = tmp_path / "outcomes.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    summary, profile = _run(_cfg(fake_ref, path), tmp_path, repo_root)
    assert summary["rows"] == 4 and summary["queries"] == 2
    queries = pd.read_parquet(tmp_path / "out" / "queries.parquet").set_index("query_id")
    assert queries.loc["q1", "question"] == "2+2? \u2028 next\u2029 \x85 end"


def test_missing_column_is_named(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    path = _write([{k: v for k, v in r.items() if k != "correct"} for r in GOOD_ROWS], tmp_path / "t.csv")
    with pytest.raises(OutcomeTableError, match=r"t\.csv: missing column\(s\) \['correct'\]"):
        _run(_cfg(fake_ref, path), tmp_path, repo_root)


def test_duplicate_pair_names_both_rows(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    path = _write(GOOD_ROWS + [GOOD_ROWS[0]], tmp_path / "t.csv")
    expected = r"duplicate \(query_id, candidate\) \('q1', 'small'\).*row 0 \(line 2\).*row 4 \(line 6\)"
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, path), tmp_path, repo_root)


def test_unknown_model_without_energy_names_model_and_row(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = GOOD_ROWS + [{**GOOD_ROWS[0], "candidate": "mystery-llm"}, {**GOOD_ROWS[2], "candidate": "mystery-llm"}]
    path = _write(rows, tmp_path / "t.jsonl")
    expected = r"row 4 \(line 5\) field 'energy_j'.*'mystery-llm' has no energy reference"
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, path), tmp_path, repo_root)


def test_bad_correct_value_names_row_and_field(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [{**r, "correct": str(r["correct"])} for r in GOOD_ROWS]  # parquet needs one type per column
    rows[3]["correct"] = "maybe"
    expected = r"row 3 field 'correct': expected a number in \[0, 1\] \(an expected correctness: 1/0, .*, got 'maybe'"
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.parquet")), tmp_path, repo_root)


def test_same_query_with_two_prompts_is_an_error(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [dict(r) for r in GOOD_ROWS]
    rows[1]["prompt"] = "two plus two?"
    with pytest.raises(OutcomeTableError, match=r"row 1 \(line 3\) field 'prompt': differs from .*row 0"):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)


def test_measured_rows_keep_their_energy_and_mixing_needs_consent(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [dict(r) for r in GOOD_ROWS]
    for row in rows[2:]:
        row.update(energy_j=5.0, energy_source="measured-nvml", latency_s=0.5)
    path = _write(rows, tmp_path / "t.csv")
    with pytest.raises(OutcomeTableError, match="different energy sources.*allow_mixed_sources"):
        _run(_cfg(fake_ref, path), tmp_path, repo_root)
    summary, profile = _run(_cfg(fake_ref, path), tmp_path, repo_root, allow_mixed_sources=True)
    measured = profile[profile["query_id"] == "q2"]
    assert summary["energy_sources"] == ["measured-nvml", "modelled"]
    assert measured["energy_j"].tolist() == [5.0, 5.0] and set(measured["energy_source"]) == {"measured-nvml"}


def test_measured_energy_needs_a_known_source(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [{**r, "energy_j": 1.0, "energy_source": "guessed", "latency_s": 0.1} for r in GOOD_ROWS]
    with pytest.raises(OutcomeTableError, match=r"row 0 \(line 2\) field 'energy_source'.*got 'guessed'"):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv"), models={}), tmp_path, repo_root)


def test_tokens_are_counted_from_text_when_not_given(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [{k: v for k, v in r.items() if not k.endswith("_tokens")} for r in GOOD_ROWS]
    rows[0]["prompt"] = rows[1]["prompt"] = "hello world"  # two tokens for the SmolLM2 BPE
    _, profile = _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)
    assert profile.loc[profile["query_id"] == "q1", "input_tokens"].tolist() == [2, 2]
    rows[0].pop("output_text")
    expected = r"row 0 \(line 2\) field 'output_tokens': is empty and so is 'output_text'"
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)


def test_modelled_row_without_tokens_is_an_error(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    rows = [dict(r) for r in GOOD_ROWS]
    rows[2].update(input_tokens=0, output_tokens=0)
    expected = r"row 2 \(line 4\) field 'input_tokens': a modelled request needs tokens"
    with pytest.raises(OutcomeTableError, match=expected):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)


def test_split_from_column_or_stable_hash(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    _run(_cfg(fake_ref, _write(GOOD_ROWS, tmp_path / "t.csv"), test_fraction=0.5), tmp_path, repo_root)
    first = pd.read_parquet(tmp_path / "out" / "queries.parquet")
    _run(_cfg(fake_ref, _write(GOOD_ROWS, tmp_path / "t.csv"), test_fraction=0.5), tmp_path, repo_root)
    assert first.equals(pd.read_parquet(tmp_path / "out" / "queries.parquet"))
    rows = [{**r, "split": "test" if r["query_id"] == "q1" else "train"} for r in GOOD_ROWS]
    _, profile = _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)
    assert profile.groupby("query_id")["split"].first().to_dict() == {"q1": "test", "q2": "train"}
    rows[0]["split"] = "holdout"
    with pytest.raises(OutcomeTableError, match=r"row 0 \(line 2\) field 'split'"):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)


def test_unsupported_format_and_bad_candidate_id(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    (tmp_path / "t.xlsx").write_bytes(b"")
    with pytest.raises(OutcomeTableError, match=r"unsupported format '\.xlsx'"):
        _run(_cfg(fake_ref, tmp_path / "t.xlsx"), tmp_path, repo_root)
    rows = [{**r, "candidate": "Big Model"} if r["candidate"] == "big" else r for r in GOOD_ROWS]
    with pytest.raises(OutcomeTableError, match=r"row 1 \(line 3\) field 'candidate'"):
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)


def _gzip(path: Path) -> bytes:
    import gzip

    return gzip.compress(_write(GOOD_ROWS, path).read_bytes())


# (file name, its bytes, what the one-line error says)
BAD_FILES = [
    ("empty.csv", lambda p: b"", r"empty\.csv: the file is empty \(0 bytes\)"),
    ("empty.jsonl", lambda p: b"", r"empty\.jsonl: the file is empty \(0 bytes\)"),
    ("empty.parquet", lambda p: b"", r"empty\.parquet: the file is empty \(0 bytes\)"),
    ("blank.csv", lambda p: b"\n\n", r"blank\.csv: no header line \(only blank lines\)"),
    ("blank.jsonl", lambda p: b"\n \n", r"blank\.jsonl: no JSON objects \(only blank lines\)"),
    ("header.csv", lambda p: b"query_id,task,prompt,candidate,correct\n", r"header\.csv: the table has a header but no rows"),
    ("binary.csv", lambda p: bytes(range(256)), r"binary\.csv: a binary file \(it holds NUL bytes\), not CSV text"),
    ("latin1.csv", lambda p: "query_id,task,prompt,candidate,correct\nq1,t,café,small,1\n".encode("latin-1"),
     r"latin1\.csv line 2: not UTF-8 text \(byte 0xe9 at offset 47\); save the file as UTF-8"),
    ("zipped.csv", _gzip, r"zipped\.csv: the file is gzip-compressed; decompress it first \(`gunzip`\)"),
    ("t.csv.gz", _gzip, r"t\.csv\.gz: unsupported format '\.gz' \(a gzip-compressed file: decompress it first\)"),
    ("fake.parquet", lambda p: b"query_id,task\n", r"fake\.parquet: not a parquet file"),
    ("broken.parquet", lambda p: b"PAR1" + b"x" * 20, r"broken\.parquet: not a readable parquet file"),
]


@pytest.mark.parametrize("name, content, expected", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_that_is_no_table_is_one_line(fake_ref, tmp_path: Path, repo_root: Path, name, content, expected) -> None:
    """Empty, blank, header-only, binary, non-UTF-8, compressed and broken files: one line naming the file."""
    path = tmp_path / name
    path.write_bytes(content(tmp_path / ("source" + Path(name.removesuffix(".gz")).suffix)))
    with pytest.raises(OutcomeTableError, match=expected) as raised:
        _run(_cfg(fake_ref, path), tmp_path, repo_root)
    assert "\n" not in str(raised.value)


def test_a_bad_flag_keeps_its_quotes_and_lists_every_spelling(fake_ref, tmp_path: Path, repo_root: Path) -> None:
    """The CLI's one line (commands/errors.py) keeps the closing quote of "got '2'" and names what is accepted."""
    from jouleroute.commands.errors import expected_error

    rows = [dict(r) for r in GOOD_ROWS]
    rows[2]["correct"] = 2
    with pytest.raises(OutcomeTableError) as raised:
        _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)
    line = expected_error(raised.value, None)
    assert line.endswith("field 'correct': expected a number in [0, 1] (an expected correctness: 1/0, 1.0/0.0 or a "
                         "fraction such as 0.3), true/false or yes/no (any case; JSON and parquet booleans too), "
                         "got '2'"), line
    rows[2]["correct"], rows[3]["correct"] = "YES", "0.0"  # accepted spellings, as listed
    _, profile = _run(_cfg(fake_ref, _write(rows, tmp_path / "t.csv")), tmp_path, repo_root)
    correct = profile.set_index(["query_id", "candidate_id"])["correct"]
    assert (correct[("q2", "small")], correct[("q2", "big")]) == (1, 0)


def test_jouleroute_import_of_an_empty_file_prints_one_line(tmp_path: Path, repo_root: Path) -> None:
    """What the user ran: `jouleroute import` on an empty file (it was a 36-line pandas traceback)."""
    import subprocess
    import sys

    import yaml

    (tmp_path / "empty.csv").write_bytes(b"")
    params = {"profile_source": "import_outcomes", "tracking": {"enabled": False},
              "paths": {"queries": str(tmp_path / "q.parquet"), "profile": str(tmp_path / "p.parquet")},
              "import_outcomes": {"input_file": str(tmp_path / "empty.csv"), "source_name": "mine"}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    done = subprocess.run([sys.executable, "-m", "jouleroute", "--params", str(tmp_path / "p.yaml"), "import"],
                          cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1:] == [
        f"jouleroute import: data error: {tmp_path / 'empty.csv'}: the file is empty (0 bytes); expected a header "
        "line and one row per (query, candidate) (docs/replay.md)"], done.stderr
