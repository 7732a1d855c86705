"""Stage ``prepare``: deterministic sampling and splitting, schema, and errors on bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jouleroute.benchmarks import BBH_SUBTASKS, TASK_NAMES, BenchmarkDataError, PrepareConfig, run_prepare
from jouleroute.benchmarks.config import SplitFractions
from jouleroute.benchmarks.prepare import assign_splits, sample_docs
from jouleroute.schema import QUERY_SCHEMA, SPLITS

REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED_REL = Path("data/external/benchmarks")  # repo-relative, as the CLI passes it


@pytest.fixture
def repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # stages run from the repository root
    return REPO_ROOT


def test_same_config_gives_identical_bytes(tmp_path, repo_cwd):
    cfg = PrepareConfig(seed=3)
    first = run_prepare(cfg, BUNDLED_REL, tmp_path / "a.parquet")
    run_prepare(cfg, BUNDLED_REL, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert pq.read_schema(tmp_path / "a.parquet").equals(QUERY_SCHEMA)
    assert len(first) == sum(cfg.samples.values())
    other = run_prepare(PrepareConfig(seed=4), BUNDLED_REL, tmp_path / "c.parquet")
    assert set(other.query_id) != set(first.query_id)


def test_every_task_in_every_split_and_bbh_covers_all_subtasks(tmp_path, repo_cwd):
    frame = run_prepare(PrepareConfig(), BUNDLED_REL, tmp_path / "q.parquet")
    assert set(frame.task) == set(TASK_NAMES)
    for task, group in frame.groupby("task"):
        assert set(group.split) == set(SPLITS), task
    assert set(frame[frame.task == "bbh"].subtask) == set(BBH_SUBTASKS)
    assert frame.query_id.is_unique


def test_rows_trace_back_to_their_source(tmp_path, repo_cwd):
    frame = run_prepare(PrepareConfig(samples={"gsm8k": 5, "mmlu": 5}), BUNDLED_REL, tmp_path / "q.parquet")
    for row in frame.itertuples():
        assert row.source_file == f"data/external/benchmarks/{row.task}/test.jsonl"  # repo-relative
        raw = json.loads((REPO_ROOT / row.source_file).read_text().splitlines()[row.source_row])
        if row.task == "gsm8k":
            assert raw["question"] == row.question and raw["answer"].endswith(f"#### {row.gold}")
        else:
            assert row.question.startswith(raw["question"]) and "ABCD"[raw["answer"]] == row.gold
            assert json.loads(row.choices_json) == raw["choices"]


def test_larger_samples_only_add_queries(bundled_dir):
    from jouleroute.benchmarks import get_task

    docs = get_task("bbh").load(bundled_dir)
    small = sample_docs(docs, 27, seed=0, by_subtask=True)
    large = sample_docs(docs, 60, seed=0, by_subtask=True)
    assert {d["subtask"] for d in small} == set(BBH_SUBTASKS)
    assert {d["query_id"] for d in small} <= {d["query_id"] for d in large}


def test_split_of_a_query_does_not_depend_on_the_others():
    ids = [f"gsm8k/test-{i:04d}" for i in range(200)]
    fractions = SplitFractions()
    few, many = assign_splits(ids[:100], fractions, seed=0), assign_splits(ids, fractions, seed=0)
    assert all(few[q] == many[q] for q in few)
    counts = {s: list(many.values()).count(s) for s in SPLITS}
    assert 90 <= counts["train"] <= 150 and counts["val"] >= 20 and counts["test"] >= 20


def test_tiny_tasks_still_get_every_split():
    fractions = SplitFractions(train=0.8, val=0.1, test=0.1)
    for seed in range(20):
        assert set(assign_splits(["a/1", "a/2", "a/3"], fractions, seed).values()) == set(SPLITS)


def test_asking_for_more_than_the_bundle_names_the_task(tmp_path, bundled_dir):
    with pytest.raises(BenchmarkDataError, match="prepare.samples.gsm8k = 5000.*local_dir"):
        run_prepare(PrepareConfig(samples={"gsm8k": 5000}), bundled_dir, tmp_path / "q.parquet")


def _local_copy(tmp_path, bundled_dir, task):
    shutil.copytree(bundled_dir / task, tmp_path / "full" / task)
    return tmp_path / "full"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda rows: rows.__setitem__(3, "{not json"), r"test.jsonl, row 3: not valid JSON"),
        (lambda rows: rows.__setitem__(4, json.dumps({"question": "q?"})),
         r"test.jsonl, row 4, field 'answer': missing"),
        (lambda rows: rows.__setitem__(5, json.dumps({"question": "q?", "answer": "no hash line"})),
         r"test.jsonl, row 5, field 'answer': no final answer after '####'"),
    ],
)
def test_bad_input_names_file_row_and_field(tmp_path, bundled_dir, edit, expected):
    local = _local_copy(tmp_path, bundled_dir, "gsm8k")
    path = local / "gsm8k" / "test.jsonl"
    rows = path.read_text().splitlines()
    edit(rows)
    path.write_text("\n".join(rows) + "\n")
    cfg = PrepareConfig(source="local", local_dir=str(local), samples={"gsm8k": 3})
    with pytest.raises(BenchmarkDataError, match=expected) as info:
        run_prepare(cfg, bundled_dir, tmp_path / "q.parquet")
    assert str(path) in str(info.value)


def test_bad_mmlu_answer_index_names_the_field(tmp_path, bundled_dir):
    local = _local_copy(tmp_path, bundled_dir, "mmlu")
    path = local / "mmlu" / "test.jsonl"
    rows = path.read_text().splitlines()
    bad = json.loads(rows[7]) | {"answer": 9}
    rows[7] = json.dumps(bad)
    path.write_text("\n".join(rows) + "\n")
    cfg = PrepareConfig(source="local", local_dir=str(local), samples={"mmlu": 3})
    with pytest.raises(BenchmarkDataError, match=r"row 7, field 'answer': index 9 is outside the 4 choices"):
        run_prepare(cfg, bundled_dir, tmp_path / "q.parquet")


def test_missing_local_file_is_named(tmp_path, bundled_dir):
    cfg = PrepareConfig(source="local", local_dir=str(tmp_path), samples={"arc_easy": 3})
    with pytest.raises(BenchmarkDataError, match=r"arc_easy/test.jsonl: missing"):
        run_prepare(cfg, bundled_dir, tmp_path / "q.parquet")


def test_default_run_never_imports_datasets(tmp_path):
    # `datasets` (and with it the Hub client) is imported only for source 'hf'.
    code = (
        "import sys; from jouleroute.benchmarks import PrepareConfig, run_prepare; "
        f"run_prepare(PrepareConfig(), 'data/external/benchmarks', r'{tmp_path / 'q.parquet'}'); "
        "assert 'datasets' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
