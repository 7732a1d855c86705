"""Capture (gateway/capture.py): records round-trip, prompts hashed when asked, a full queue drops and counts and
never blocks, segments rotate, a torn last line is skipped and counted; a restarted gateway reads its folder line by
line."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc

from jouleroute.gateway.capture import Capture, CaptureConfig, CaptureWriter, prompt_hash, read_capture, sampled


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


def test_a_restarted_capture_reads_its_folder_line_by_line_and_knows_what_the_whole_read_knew(tmp_path):
    """Start-up reads (request id, candidate) of the last ``remember`` records, line by line: its memory stays far
    below the folder's size, and it knows exactly the ids, candidates and order that reading every record gave
    (by time, each id once: the first kept; a torn line and a line with no id skipped)."""
    prompt = "x" * 200_000
    lines = [[], []]
    for i in range(100):  # two segments, 20 MB of prompts; the second one's times run before the first's
        served = {"candidate": f"c{i % 3}"} if i % 7 else None
        record = {"request_id": f"r{i:03d}", "time": f"2026-12-06T00:{99 - i if i >= 50 else i:02d}:00Z",
                  "messages": [{"role": "user", "content": prompt}], "served": served}
        lines[i // 50].append(json.dumps(record))
    lines[1] += [json.dumps({"request_id": "r030", "time": "2026-12-07T00:00:00Z", "served": {"candidate": "late"}}),
                 json.dumps({"time": "2026-12-07T00:00:01Z", "served": {"candidate": "no-id"}}), '{"request_id": "r1']
    for n, segment in enumerate(lines):
        (tmp_path / f"capture-2026120{6 + n}T000000000000-1.jsonl").write_text("\n".join(segment) + "\n")
    whole = {}
    for record in read_capture(tmp_path).records[-60:]:
        if isinstance(record.get("request_id"), str):
            whole[record["request_id"]] = (record.get("served") or {}).get("candidate")

    tracemalloc.start()
    try:
        capture = Capture(CaptureConfig(folder=str(tmp_path)), tmp_path, remember=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    capture.close()
    assert list(capture._ids.items()) == list(whole.items()) and len(whole) == 59
    assert [capture.candidate_of(i) for i in ("r030", "r035", "r079", "r080")] == [(True, "c0"), (True, None),
                                                                                   (True, "c1"), (False, None)]
    assert peak < 4_000_000, f"start-up held {peak} bytes for a 20 MB folder"
