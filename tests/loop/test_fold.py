"""Folding the capture (jouleroute/loop/fold.py): records the gateway's own writer wrote become prompts the
labels reader imports as queries and feedback rows naming those queries; a second fold adds nothing; a segment
still being written is folded up to its last complete line and the rest folded later."""

from __future__ import annotations

import csv
import json
import time

import pytest

from jouleroute.benchmarks.config import PromptsFileConfig
from jouleroute.gateway.capture import FEEDBACK, CaptureConfig, CaptureWriter, capture_record
from jouleroute.labels.queries import import_prompts, prompt_query_id
from jouleroute.loop.fold import fold


def _served(i: int, keep: bool = True, task: str = "") -> dict:
    body = {"model": "jouleroute-auto", "messages": [{"role": "system", "content": "be brief"},
                                                      {"role": "user", "content": f"what is {i} plus {i}?"}]}
    usage = {"candidate": "tiny-a" if i % 2 else "tiny-b", "energy_j": 1.5, "energy_source": "estimated"}
    return capture_record(f"req-{i:03d}", body, task, keep, "route:abc", 200, 0.1, usage, f"{2 * i}", None)


def _write(folder, records, stream="capture"):
    writer = CaptureWriter(CaptureConfig(folder=str(folder)), folder)
    for r in records:
        assert writer.offer(r, stream)
    deadline = time.monotonic() + 10
    while writer.written[stream] < len(records) and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.close()


def _paths(tmp_path):
    return tmp_path / "w/data/prompts.jsonl", tmp_path / "w/data/feedback.csv", tmp_path / "w/state.json"


def _fold(tmp_path, capture, cfg):
    return fold(capture, *_paths(tmp_path), cfg)


def test_captured_requests_become_queries_and_feedback_names_them(tmp_path):
    capture = tmp_path / "capture"
    cfg = PromptsFileConfig(file="w/data/prompts.jsonl", task="user")
    _write(capture, [_served(i) for i in range(6)] + [_served(9, keep=False)] + [_served(7, task="gsm8k")])
    _write(capture, [{"request_id": "req-001", "candidate": "tiny-a", "score": 1.0, "created": 1.0},
                     {"request_id": "req-002", "candidate": None, "score": 0.0, "created": 2.0},
                     {"request_id": "req-404", "candidate": "tiny-a", "score": 0.5, "created": 3.0}], FEEDBACK)
    done = _fold(tmp_path, capture, cfg)
    assert (done.prompts, done.hashed, done.feedback, done.pending_feedback) == (7, 1, 2, 1)

    prompts, feedback, state = _paths(tmp_path)
    imported = import_prompts(prompts, cfg)
    assert imported.summary["queries"] == 7 and imported.summary["split_rule"] == "time-ordered"
    ids = set(imported.table.column("query_id").to_pylist())
    assert prompt_query_id("gsm8k", "what is 7 plus 7?") in ids  # the request's own task
    rows = list(csv.DictReader(feedback.open()))
    assert {(r["query_id"], r["candidate_id"], float(r["score"])) for r in rows} == {
        (prompt_query_id("user", "what is 1 plus 1?"), "tiny-a", 1.0),
        (prompt_query_id("user", "what is 2 plus 2?"), "tiny-b", 0.0)}  # the candidate that answered it
    assert all(r["query_id"] in ids for r in rows)
    created = [json.loads(l)["created"] for l in prompts.read_text().splitlines()]
    assert created == sorted(created)  # time-ordered

    before = (prompts.read_bytes(), feedback.read_bytes())
    again = _fold(tmp_path, capture, cfg)
    assert (again.prompts, again.feedback, again.segments) == (0, 0, {})
    assert (prompts.read_bytes(), feedback.read_bytes()) == before  # folding twice adds nothing
    assert json.loads(state.read_text())["pending_feedback"][0]["request_id"] == "req-404"


def test_a_segment_being_written_is_folded_to_its_last_complete_line(tmp_path):
    capture = tmp_path / "capture"
    capture.mkdir()
    cfg = PromptsFileConfig(file="w/data/prompts.jsonl")
    segment = capture / "capture-20260101T000000000000-1.jsonl"
    lines = [json.dumps(_served(i)) for i in range(3)]
    segment.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:25])  # the third still being written
    assert _fold(tmp_path, capture, cfg).prompts == 2
    with segment.open("a") as handle:
        handle.write(lines[2][25:] + "\n" + json.dumps(_served(3)) + "\n")
    done = _fold(tmp_path, capture, cfg)
    assert done.prompts == 2 and done.unreadable == 0 and done.duplicates == 0
    assert len(_paths(tmp_path)[0].read_text().splitlines()) == 4


def test_a_fold_killed_before_its_state_was_written_folds_nothing_twice(tmp_path):
    capture = tmp_path / "capture"
    cfg = PromptsFileConfig(file="w/data/prompts.jsonl")
    _write(capture, [_served(i) for i in range(3)])
    _write(capture, [{"request_id": "req-001", "candidate": "tiny-a", "score": 1.0, "created": 1.0}], FEEDBACK)
    _fold(tmp_path, capture, cfg)
    _paths(tmp_path)[2].unlink()  # as if killed between writing the data and the state
    done = _fold(tmp_path, capture, cfg)
    assert (done.prompts, done.feedback, done.duplicates) == (0, 0, 4)


def test_a_refused_request_is_no_traffic_but_a_failed_answer_is():
    from jouleroute.loop.fold import prompt_line

    record = {"request_id": "r", "created": 1.0, "messages": [{"role": "user", "content": "What is 2 plus 2?"}]}
    assert prompt_line({**record, "served": {"status": 422}}) is None
    assert prompt_line({**record, "served": {"status": 502}})["messages"] == record["messages"]
    assert prompt_line({**record, "served": {"status": 200}})["request_id"] == "r"


def _segment(capture, records) -> str:
    """One capture segment written as another program might (raw non-ASCII, as the gateway's writer does)."""
    capture.mkdir(parents=True, exist_ok=True)
    path = capture / "capture-20260101T000000000000-1.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_a_prompt_with_a_unicode_line_separator_folds_again_and_imports(tmp_path):
    """U+2028, U+2029 and U+0085 are kept raw in a JSON line; str.splitlines cut the prompts file there, so the
    next fold and the prepare stage failed on a line of half a record."""
    capture, cfg = tmp_path / "capture", PromptsFileConfig(file="w/data/prompts.jsonl", task="user")
    odd = ["line one\u2028line two", "para\u2029graph", "caf\u00e9 \x85 next"]
    _segment(capture, [_served(i) | {"messages": [{"role": "user", "content": text}]} for i, text in enumerate(odd)])
    assert _fold(tmp_path, capture, cfg).prompts == 3
    with (capture / "capture-20260101T000000000000-1.jsonl").open("a") as handle:
        handle.write(json.dumps(_served(7)) + "\n")
    assert _fold(tmp_path, capture, cfg).prompts == 1  # the second fold reads the file the first wrote
    imported = import_prompts(_paths(tmp_path)[0], cfg)
    assert imported.summary["queries"] == 4
    assert prompt_query_id("user", odd[0]) in set(imported.table.column("query_id").to_pylist())


def test_a_prompt_without_text_is_counted_and_never_blocks_the_fold(tmp_path):
    """Whitespace, or only an image: the gateway answers it, the prompts reader finds no text in it. The fold
    counts it as no prompt (it used to fold it, then refuse every later fold on it)."""
    capture, cfg = tmp_path / "capture", PromptsFileConfig(file="w/data/prompts.jsonl", task="user")
    image = [{"type": "image_url", "image_url": {"url": "http://example.invalid/a.png"}}]
    _segment(capture, [_served(0), _served(1) | {"messages": [{"role": "user", "content": "   "}]},
                       _served(2) | {"messages": [{"role": "user", "content": image}]}])
    done = _fold(tmp_path, capture, cfg)
    assert (done.prompts, done.no_prompt) == (1, 2) and _paths(tmp_path)[2].is_file()


@pytest.mark.parametrize(("stream", "field", "value"), [
    ("capture", "created", "2026-01-01T00:00:00Z"), ("capture", "request_id", None), ("capture", "task", 5),
    ("feedback", "score", "great"), ("feedback", "score", 1.5)])
def test_a_line_the_gateway_would_not_write_stops_the_fold_naming_segment_line_and_field(tmp_path, stream, field,
                                                                                           value):
    from jouleroute.loop.fold import CaptureRecordError

    capture, cfg = tmp_path / "capture", PromptsFileConfig(file="w/data/prompts.jsonl", task="user")
    _segment(capture, [_served(i) for i in range(3)])
    records = [_served(3)] if stream == "capture" else [{"request_id": "req-001", "candidate": "tiny-a",
                                                         "score": 1.0, "created": 1.0}]
    records.append({**records[0], field: value, "request_id": "req-bad" if field != "request_id" else value})
    path = capture / f"{stream}-20260102T000000000000-1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(CaptureRecordError, match=rf"{path.name}:2: '{field}' must be .*got {value!r}"):
        _fold(tmp_path, capture, cfg)
    assert not any(p.exists() for p in _paths(tmp_path))  # nothing folded, so nothing half-done


def test_a_restarted_gateway_reads_a_capture_line_without_a_request_id(tmp_path):
    from jouleroute.gateway.capture import Capture

    capture = tmp_path / "capture"
    _segment(capture, [_served(0), {k: v for k, v in _served(1).items() if k != "request_id"}])
    started = Capture(CaptureConfig(folder=str(capture)), capture)
    try:
        assert started.candidate_of("req-000") == (True, "tiny-b")
    finally:
        started.writer.close()
