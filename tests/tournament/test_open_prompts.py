"""A user's own prompts through prepare and the tournament: no gold, so every pair is answered, metered and read,
never graded.

The prompts are a chat-completions JSONL with times (written out of time order), one repeated prompt and one
line of a registered task (gsm8k, no gold). The pool is the pipeline tests' tiny model asked three ways (chat
direct, chat loglik, few-shot), serial and in-process, energy the labelled CPU-time estimate.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from jouleroute.benchmarks.task_free import extract_answer
from jouleroute.schema import QUERY_SCHEMA

REPO = Path(__file__).resolve().parents[2]
START = 1_700_000_000
ORDER = [7, 2, 9, 0, 5, 1, 8, 3, 6, 4]  # prompt i was sent at START + 60 i


def _request(text: str, created: int, **extra) -> str:
    return json.dumps({"model": "jouleroute-auto", "messages": [{"role": "user", "content": text}],
                       "created": created, **extra})


def prompt_lines() -> list[str]:
    lines = [_request(f"Question {i}: what is {i} plus {i}?", START + 60 * i) for i in ORDER]
    lines.append(_request("Question 4: what is 4 plus 4?", START + 999))  # asked again later: one query
    lines[0] = _request("Tom has 7 apples and eats 2. How many are left?", START + 60 * 7, metadata={"task": "gsm8k"})
    return lines


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext
    from tests.pipeline.conftest import tiny_params

    root = tmp_path_factory.mktemp("open-prompts")
    params = tiny_params(build_tiny_llama(root / "tiny"))
    (root / "prompts.jsonl").write_text("\n".join(prompt_lines()) + "\n")
    params["prepare"] = {"source": "prompts", "prompts": {"file": "prompts.jsonl"}}
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")  # the few-shot candidate's gsm8k exemplars
    params["energy"]["idle_seconds"] = 0.05
    params["tracking"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(root / "params.yaml", root))
    return root


def _tournament(work: Path) -> pd.DataFrame:
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.tournament import tournament_stage

    return tournament_stage(StageContext.load(work / "params.yaml", work))


def test_prepare_reads_the_prompts_file_into_a_time_ordered_query_table_without_gold(work):
    path = work / "artifacts/prepare/queries.parquet"
    queries = pd.read_parquet(path)
    assert pq.read_schema(path).remove_metadata().equals(QUERY_SCHEMA)
    assert len(queries) == 10 and queries["gold"].isna().all()  # the repeated prompt is one query
    assert queries["source_file"].eq("prompts.jsonl").all()
    assert dict(queries["task"].value_counts()) == {"user": 9, "gsm8k": 1}
    by_time = queries.sort_values("source_row", key=lambda rows: rows.map(lambda r: ORDER[r] if r < 10 else 99))
    assert by_time["split"].tolist() == ["train"] * 6 + ["val"] * 2 + ["test"] * 2  # oldest train, newest test


def test_the_tournament_answers_every_prompt_and_grades_none(work, caplog):
    with caplog.at_level(logging.WARNING, logger="jouleroute.tournament.open_prompts"):
        profile = _tournament(work)
    assert len(profile) == 30 and not profile.duplicated(["query_id", "candidate_id"]).any()
    assert profile["correct"].isna().all()  # gsm8k's row too: a registered task without gold is ungraded
    for row in profile[profile["task"] == "user"].itertuples():
        extracted = None if pd.isna(row.extracted_answer) else row.extracted_answer
        assert extracted == extract_answer(row.output_text)  # the task-free extractor's reading
        assert row.invalid == int(extracted is None)
    assert (profile.loc[profile["task"] == "user", "invalid"] == 0).any()  # the seeded tiny model states some numbers
    assert (profile["energy_j"] > 0).all() and profile["energy_source"].eq("estimated").all()
    assert (profile["output_tokens"] > 0).all() and (profile["latency_s"] > 0).all()
    assert "tiny-loglik" in caplog.text and "'user'" in caplog.text  # it generates: said in one line
    summary = json.loads((work / "artifacts/tournament/summary.json").read_text())
    assert {s["ungraded"] for s in summary.values()} == {10.0} and {s["graded"] for s in summary.values()} == {0.0}


def test_a_resumed_tournament_keeps_the_null_correctness_and_stores_no_pair_twice(work):
    first = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    shard = sorted((work / "artifacts/tournament/shards").glob("*/*.parquet"))[0]
    lost = set(zip(*pq.read_table(shard, columns=["query_id", "candidate_id"]).to_pydict().values()))
    shard.unlink()  # as if killed before this batch was written
    again = _tournament(work)
    assert len(again) == 30 and not again.duplicated(["query_id", "candidate_id"]).any()
    assert again["correct"].isna().all() and again["invalid"].notna().all()
    rerun = {pair for pair, old, new in zip(zip(again["query_id"], again["candidate_id"]), first["run_id"],
                                            again["run_id"]) if old != new}
    assert rerun == lost  # only the lost batch was answered again
