"""A user's prompts as queries: chat-completions JSONL or a parquet, split by time or by a seed."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pandas as pd
import pytest

from jouleroute.benchmarks.config import SplitFractions
from jouleroute.benchmarks.prepare import assign_splits
from jouleroute.gateway.protocol import parse_request
from jouleroute.labels.config import PromptsConfig
from jouleroute.labels.prompts import PromptFileError
from jouleroute.labels.queries import import_prompts, prompt_query_id, time_ordered_splits
from jouleroute.schema import QUERY_COLUMNS

START = 1_700_000_000


def _request(text: str, created: int | None = None, **extra) -> dict:
    body = {"model": "jouleroute-auto", "messages": [{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": text}], **extra}
    return body if created is None else body | {"created": created}


def _write(path, requests) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests))


def test_a_jsonl_of_chat_requests_with_times_splits_oldest_to_train_newest_to_test(tmp_path):
    path = tmp_path / "requests.jsonl"
    order = [7, 2, 9, 0, 5, 1, 8, 3, 6, 4]  # written out of time order: the split follows the times
    _write(path, [_request(f"question {i}", START + 60 * i) for i in order] + [_request("question 4", START + 999)])
    imported = import_prompts(path, PromptsConfig(), "requests.jsonl")
    table = imported.table.to_pandas()
    assert tuple(table.columns) == QUERY_COLUMNS and table["gold"].isna().all()
    split = dict(zip(table["question"], table["split"]))
    assert [split[f"question {i}"] for i in range(10)] == ["train"] * 6 + ["val"] * 2 + ["test"] * 2
    assert imported.summary["split_rule"] == "time-ordered" and imported.summary["duplicates_dropped"] == 1
    assert imported.summary["splits"] == {"train": 6, "val": 2, "test": 2}
    assert imported.summary["time_range"]["test"][1] == datetime.fromtimestamp(START + 540, timezone.utc).isoformat()
    repeated = table[table["question"] == "question 4"].iloc[0]
    assert repeated["source_row"] == order.index(4)  # the oldest occurrence is the query
    assert repeated["query_id"] == prompt_query_id("user", "question 4") and repeated["query_id"].startswith("user/")


def test_the_prompt_is_what_the_gateways_router_reads(tmp_path):
    """The last user message, content parts joined, as gateway/protocol.parse_request's route_text."""
    body = {"model": "m", "messages": [{"role": "user", "content": "first turn"},
                                       {"role": "assistant", "content": "ok"},
                                       {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"},
                                                                    {"type": "text", "text": "Answer briefly."}]}],
            "task": "gsm8k", "metadata": {"timestamp": "2024-05-01T10:00:00Z"}}
    path = tmp_path / "one.jsonl"
    _write(path, [body])
    imported = import_prompts(path, PromptsConfig())
    row = imported.table.to_pylist()[0]
    assert row["question"] == parse_request(json.dumps(body).encode(), "chat").route_text
    assert row["task"] == "gsm8k" and imported.summary["earlier_turns_dropped"] == 1


def test_without_times_the_split_is_the_seeded_split_of_prepare(tmp_path):
    path = tmp_path / "requests.jsonl"
    _write(path, [_request(f"q {i}") for i in range(30)])
    cfg = PromptsConfig(seed=3)
    table = import_prompts(path, cfg).table.to_pandas()
    assert dict(zip(table["query_id"], table["split"])) == assign_splits(list(table["query_id"]), cfg.split, 3)
    assert import_prompts(path, cfg).table.equals(import_prompts(path, cfg).table)  # deterministic


@pytest.mark.parametrize("lines, message", [
    ([], r"requests.jsonl: empty file"),
    (["", "   "], r"requests.jsonl: empty file"),
    ([_request("fine"), "{not json"], r"requests.jsonl:2: not JSON"),
    ([_request("fine"), "", '["a list"]'], r"requests.jsonl:3: not a chat-completions request"),
    ([{"model": "m", "prompt": "a completion"}], r"requests.jsonl:1: not a chat-completions request"),
    ([{"model": "m", "messages": [{"role": "system", "content": "only a system prompt"}]}],
     r"requests.jsonl:1: no prompt: the request has no user message"),
    ([_request("a", START), _request("b", START, metadata={}) | {"created": "yesterday"}],
     r"requests.jsonl:2: created 'yesterday' is no time"),
    ([_request("a", START), _request("b")], r"requests.jsonl:2: no time \('created' or 'timestamp'\)"),
])
def test_a_bad_file_fails_in_one_line_naming_the_line(tmp_path, lines, message):
    path = tmp_path / "requests.jsonl"
    _write(path, lines)
    with pytest.raises(PromptFileError, match=message) as error:
        import_prompts(path, PromptsConfig(), "requests.jsonl")
    assert "\n" not in str(error.value)


def test_a_parquet_with_a_prompt_column_and_times(tmp_path):
    path = tmp_path / "prompts.parquet"
    times = pd.to_datetime([START + i for i in (3, 1, 2, 0)], unit="s")
    pd.DataFrame({"text": ["d", "b", "c", "a"], "timestamp": times}).to_parquet(path)
    cfg = PromptsConfig(prompt_column="text", split=SplitFractions(train=0.5, val=0.25, test=0.25))
    table = import_prompts(path, cfg).table.to_pandas()
    assert dict(zip(table["question"], table["split"])) == {"a": "train", "b": "train", "c": "val", "d": "test"}
    with pytest.raises(PromptFileError, match=r"prompts.parquet: no prompt column 'prompt' \(prompts.prompt_column\); "
                                              r"columns: text, timestamp"):
        import_prompts(path, PromptsConfig(), "prompts.parquet")
    pd.DataFrame({"prompt": ["fine", " "]}).to_parquet(path)
    with pytest.raises(PromptFileError, match=r"prompts.parquet row 1: no prompt"):
        import_prompts(path, PromptsConfig(), "prompts.parquet")


def test_every_split_with_a_share_gets_a_query_when_there_are_enough():
    assert time_ordered_splits(3, SplitFractions(train=0.8, val=0.1, test=0.1)) == ["train", "val", "test"]
