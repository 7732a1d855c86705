"""A small valid profile and query table, built once and corrupted per test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jouleroute.schema import PROFILE_SCHEMA, QUERY_SCHEMA

QUERY_IDS = ["gsm8k/0", "gsm8k/1", "mmlu/0", "mmlu/1"]
CANDIDATES = ["smol-direct", "gemma-cot"]


def _queries() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": QUERY_IDS,
            "task": [q.split("/")[0] for q in QUERY_IDS],
            "subtask": [""] * 4,
            "split": ["train", "test", "train", "test"],
            "question": ["q"] * 4,
            "choices_json": ["[]"] * 4,
            "gold": ["1"] * 4,
            "source_file": ["data/x.jsonl"] * 4,
            "source_row": list(range(4)),
        }
    )


def _profile(queries: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for i, q in enumerate(queries.itertuples()):
        for j, cand in enumerate(CANDIDATES):
            rows.append(
                {
                    "query_id": q.query_id, "candidate_id": cand, "task": q.task, "split": q.split,
                    "correct": (i + j) % 2, "invalid": 0, "extracted_answer": "1", "output_text": "... 1",
                    "input_tokens": 20, "output_tokens": 5 + 10 * j, "batch_size": 4,
                    "latency_s": 0.5 + j, "ttft_s": None, "energy_j": 3.0 + 20 * j, "energy_net_j": 1.0 + 15 * j,
                    "idle_power_w": 4.0, "avg_power_w": 6.0 + 10 * j, "energy_source": "estimated",
                    "energy_attribution": "tokens", "window_s": 2.0, "model_id": cand.split("-")[0],
                    "backend": "transformers", "run_id": "run-1",
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def valid_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    queries = _queries()
    return queries, _profile(queries)


def write_profile(frame: pd.DataFrame, path: Path, schema: pa.Schema | None = PROFILE_SCHEMA) -> Path:
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
    return path


@pytest.fixture()
def paths(tmp_path: Path, valid_tables) -> dict[str, Path]:
    queries, _ = valid_tables
    qpath = tmp_path / "queries.parquet"
    pq.write_table(pa.Table.from_pandas(queries, schema=QUERY_SCHEMA, preserve_index=False), qpath)
    return {"queries": qpath, "profile": tmp_path / "profile.parquet", "out": tmp_path / "validate"}
