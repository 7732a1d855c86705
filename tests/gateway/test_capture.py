"""Capture (gateway/capture.py): records round-trip, prompts hashed when asked, a full queue drops and counts and
never blocks, segments rotate, a torn last line is skipped and counted."""

from __future__ import annotations

import json
import threading
import time

from jouleroute.gateway.capture import CaptureConfig, CaptureWriter, prompt_hash, read_capture, sampled


def _record(i: int) -> dict:
    return {"request_id": f"r{i:04d}", "time": f"2026-12-06T00:00:{i % 60:02d}.{i:06d}Z",
            "request": {"messages": [{"role": "user", "content": f"question {i}"}]}}


def _wait(writer: CaptureWriter, n: int) -> None:
    deadline = time.monotonic() + 10
    while writer.written["capture"] < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_records_round_trip_in_order_and_segments_rotate(tmp_path):
    writer = CaptureWriter(CaptureConfig(folder=str(tmp_path), max_segment_bytes=2048), tmp_path)
    for i in range(60):
        assert writer.offer(_record(i))
    _wait(writer, 60)
    writer.close()
    read = read_capture(tmp_path)
    assert [r["request_id"] for r in read.records] == [f"r{i:04d}" for i in range(60)]
    assert read.torn == 0 and read.duplicates == 0 and read.segments > 1  # rotated by size


def test_a_full_queue_drops_and_counts_and_never_blocks(tmp_path):
    writer = CaptureWriter(CaptureConfig(folder=str(tmp_path), queue_size=1), tmp_path)
    writer._stop.set()  # the writer thread stops draining: the queue stays full after one record
    writer._thread.join()
    results: list[bool] = []
    offering = threading.Thread(target=lambda: results.extend(writer.offer(_record(i)) for i in range(1000)))
    offering.start()
    offering.join(60)  # a hang detector, not a timing target: a blocking put would never return
    assert not offering.is_alive() and results[0] and not any(results[1:]) and writer.dropped == 999


def test_a_torn_last_line_is_skipped_and_counted_and_duplicates_are_dropped(tmp_path):
    lines = [json.dumps(_record(i)) for i in range(3)] + [json.dumps(_record(1))]
    (tmp_path / "capture-20261206T000000000000-1.jsonl").write_text("\n".join(lines) + "\n" + '{"request_id": "r9')
    read = read_capture(tmp_path)
    assert [r["request_id"] for r in read.records] == ["r0000", "r0001", "r0002"]
    assert read.torn == 1 and read.duplicates == 1


def test_prompts_hash_and_sampling_is_stable():
    assert prompt_hash("hello") == prompt_hash("hello") != prompt_hash("hello!")
    assert prompt_hash("hello").startswith("sha256:") and len(prompt_hash("x")) == 7 + 64
    kept = [sampled(f"id{i}", 0.25) for i in range(4000)]
    assert 0.2 < sum(kept) / len(kept) < 0.3 and kept == [sampled(f"id{i}", 0.25) for i in range(4000)]
