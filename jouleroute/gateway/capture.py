"""Capture: what the gateway serves, written down for the next tournament (off by default; ``gateway.capture``).

One JSON line per served request, appended to segment files in ``gateway.capture.folder``: the request id, the
time, the prompt (or only its sha256 when ``keep_prompts`` is off), the deployed policy's version, the route or
chain taken, every model called with its answer, joules and joules source, latency and status. The request is a
chat-completions body, the format `jouleroute.labels.prompts` reads, so a capture folder is a query table away.

- **Never blocks a response**: ``offer`` puts the record on a bounded queue and returns; a full queue drops the
  record and counts it (``/metrics``: ``jouleroute_gateway_capture_dropped``). One thread writes.
- **Segments rotate** by size (``max_segment_bytes``) or age (``max_segment_s``): ``capture-<UTC start>-<pid>.jsonl``.
  Lines are flushed to the file as they are written (``flush_every``), so a kill -9 loses at most the records
  still on the queue and leaves at most one torn last line, which ``read_capture`` skips and counts.
- **Feedback** (``POST /v1/feedback``) lands in ``feedback-<UTC start>-<pid>.jsonl`` in the same folder.
- **Sampling**: ``sample_rate`` < 1 keeps that share of requests, by a hash of the request id (reproducible).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import Field

from jouleroute.strict import StrictModel

logger = logging.getLogger(__name__)

CAPTURE, FEEDBACK = "capture", "feedback"


class CaptureConfig(StrictModel):
    """``gateway.capture``: off unless ``folder`` is set (module doc)."""

    folder: str | None = None  # relative paths are from the repo root
    sample_rate: float = Field(default=1.0, gt=0.0, le=1.0)
    keep_prompts: bool = True  # false: only the prompt's sha256 is written
    max_segment_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    max_segment_s: float = Field(default=3600.0, gt=0)
    queue_size: int = Field(default=10_000, ge=1)
    flush_every: int = Field(default=1, ge=1)  # lines between flushes to the file


def prompt_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def sampled(request_id: str, rate: float) -> bool:
    """Whether ``request_id`` falls in the kept share (a stable hash, so a rerun keeps the same requests)."""
    if rate >= 1.0:
        return True
    return int(hashlib.sha256(request_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < rate


@dataclass
class _Segment:
    path: Path
    opened: float
    handle: object
    size: int = 0
    lines: int = 0


@dataclass
class CaptureWriter:
    """The bounded queue and its writer thread (module doc). ``offer`` never blocks."""

    cfg: CaptureConfig
    folder: Path
    written: dict = field(default_factory=lambda: {CAPTURE: 0, FEEDBACK: 0})
    dropped: int = 0

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._queue: queue.Queue = queue.Queue(maxsize=self.cfg.queue_size)
        self._segments: dict[str, _Segment] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jouleroute-capture", daemon=True)
        self._thread.start()

    def offer(self, record: dict, stream: str = CAPTURE) -> bool:
        """Queue ``record`` for ``stream`` (capture or feedback); False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((stream, record))
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, then stop (the gateway's shutdown)."""
        self._stop.set()
        self._thread.join(timeout_s)
        for seg in self._segments.values():
            seg.handle.close()

    def _run(self) -> None:
        while not (self._stop.is_set() and self._queue.empty()):
            try:
                stream, record = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                self._write(stream, record)
            except Exception:  # a full disk must not kill the thread; the record is counted as dropped
                logger.exception("capture: could not write a %s record", stream)
                self.dropped += 1

    def _write(self, stream: str, record: dict) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        seg = self._segments.get(stream)
        now = time.time()
        if seg is None or seg.size + len(line) > self.cfg.max_segment_bytes or now - seg.opened > self.cfg.max_segment_s:
            if seg is not None:
                seg.handle.close()
            seg = self._segments[stream] = self._open(stream, now)
        seg.handle.write(line)
        seg.size += len(line)
        seg.lines += 1
        if seg.lines % self.cfg.flush_every == 0:
            seg.handle.flush()
        self.written[stream] += 1

    def _open(self, stream: str, now: float) -> _Segment:
        stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        path = self.folder / f"{stream}-{stamp}-{os.getpid()}.jsonl"
        return _Segment(path, now, open(path, "ab", buffering=0))


@dataclass
class CaptureRead:
    """Every readable record of a folder's segments, in time order, each request id once."""

    records: list[dict]
    torn: int  # torn or unreadable lines skipped (at most one per segment after a kill)
    duplicates: int  # records whose request id came earlier (kept: the first)
    segments: int


def json_lines(blob: bytes) -> tuple[list[dict], int]:
    """The JSON objects of ``blob``'s lines, and how many lines were unreadable (torn, or not an object)."""
    numbered, bad = numbered_json_lines(blob)
    return [record for _, record in numbered], bad


def numbered_json_lines(blob: bytes, first: int = 1) -> tuple[list[tuple[int, dict]], int]:
    """``json_lines`` with each object's line number (``blob``'s first line numbered ``first``)."""
    records, bad = [], 0
    for number, raw in enumerate(blob.split(b"\n"), start=first):
        if not raw.strip():
            continue
        record = line_object(raw)
        if record is None:
            bad += 1
        else:
            records.append((number, record))
    return records, bad


def line_object(raw: bytes) -> dict | None:
    """A non-blank line's JSON object, or None when the line is unreadable (torn, or not an object)."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_capture(folder: Path, stream: str = CAPTURE) -> CaptureRead:
    """Read ``stream``'s segments in ``folder`` (module doc): a torn last line is skipped and counted."""
    records, torn, seen, dupes = [], 0, set(), 0
    paths = sorted(Path(folder).glob(f"{stream}-*.jsonl"))
    for path in paths:
        parsed, unreadable = json_lines(path.read_bytes())
        torn += unreadable
        for record in parsed:
            key = record.get("request_id") if stream == CAPTURE else None
            if key is not None and key in seen:
                dupes += 1
                continue
            seen.add(key)
            records.append(record)
    records.sort(key=lambda r: r.get("time", ""))
    return CaptureRead(records, torn, dupes, len(paths))


def served_candidates(folder: Path, remember: int) -> list[tuple[object, str | None]]:
    """What a restarted gateway needs of its capture: (request id, the candidate that answered) of the last
    ``remember`` records in ``read_capture``'s order (by time, each request id once: the first). Read line by line,
    holding only these pairs and the ids seen, never the records (a folder holds every prompt served)."""
    latest: list[tuple] = []  # a min-heap of (time, order read, request id, candidate): the latest so far
    seen, order = set(), 0
    for path in sorted(Path(folder).glob(f"{CAPTURE}-*.jsonl")):
        with open(path, "rb") as lines:
            for raw in lines:
                record = line_object(raw) if raw.strip() else None
                if record is None:
                    continue
                key = record.get("request_id")
                if key is not None and key in seen:
                    continue
                seen.add(key)
                served = record.get("served") or {}
                candidate = served.get("candidate") if isinstance(served, dict) else None
                item, order = (record.get("time", ""), order, key, candidate), order + 1
                if len(latest) < remember:
                    heapq.heappush(latest, item)
                else:
                    heapq.heappushpop(latest, item)
    return [(key, candidate) for _, _, key, candidate in sorted(latest)]


def capture_record(request_id: str, body: dict, task: str, keep_prompts: bool, version: str, status: int,
                   latency_s: float, usage: dict | None, answer_text: str | None, error: str | None) -> dict:
    """One served request as a capture line: a chat-completions body (``messages`` or ``prompt``, or only their
    sha256) with its time, so `jouleroute.labels` reads a segment as prompts; ``served``: what answered it."""
    now = time.time()
    record: dict = {"request_id": request_id, "created": round(now, 6),
                    "time": datetime.fromtimestamp(now, timezone.utc).isoformat().replace("+00:00", "Z"),
                    "model": body.get("model"), "task": task or None}
    prompt = {k: body[k] for k in ("messages", "prompt") if k in body}
    if keep_prompts:
        record |= prompt
    else:
        record["prompt_sha256"] = prompt_hash(json.dumps(prompt, sort_keys=True, ensure_ascii=False))
    calls = (usage or {}).get("cascade", {}).get("calls")
    if calls is None and usage and usage.get("candidate"):  # a route or a named candidate: one call
        calls = [{"candidate": usage["candidate"], "answer": answer_text, "energy_j": usage.get("energy_j"),
                  "energy_source": usage.get("energy_source")}]
    record["served"] = {"policy_version": version, "status": status, "latency_s": round(latency_s, 6),
                        "candidate": (usage or {}).get("candidate"), "energy_weight": (usage or {}).get("energy_weight"),
                        "router": (usage or {}).get("router", {}).get("name"),
                        "chain": (usage or {}).get("cascade", {}).get("stages"),
                        "energy_j": (usage or {}).get("energy_j"), "energy_source": (usage or {}).get("energy_source"),
                        "calls": calls or [], "answer": answer_text if keep_prompts else None, "error": error}
    return record


class Capture:
    """A gateway's capture: the writer, the request ids it has seen (so feedback can name one), and the gauges."""

    def __init__(self, cfg: CaptureConfig, folder: Path, metrics_registry=None, remember: int = 200_000) -> None:
        from collections import OrderedDict

        if remember < 1:
            raise ValueError(f"Capture(remember={remember}): remember at least 1 request id")
        self.cfg, self.folder = cfg, folder
        self.writer = CaptureWriter(cfg, folder)
        self._ids: OrderedDict[str, str | None] = OrderedDict()  # request id -> the candidate that answered
        self._remember = remember
        for key, candidate in served_candidates(folder, remember):  # a restarted gateway still knows its traffic
            if isinstance(key, str):  # a line written by another hand may lack one
                self._ids[key] = candidate
        if metrics_registry is not None:
            self.register_gauges(metrics_registry)

    def register_gauges(self, registry) -> None:
        """The capture's counts on a gateway's /metrics (again on a reloaded gateway's)."""
        from prometheus_client import Gauge

        Gauge("jouleroute_gateway_capture_records", "Capture records written since start",
              registry=registry).set_function(lambda: self.writer.written[CAPTURE])
        Gauge("jouleroute_gateway_capture_dropped", "Capture records dropped (queue full or write failed)",
              registry=registry).set_function(lambda: self.writer.dropped)
        Gauge("jouleroute_gateway_feedback_records", "Feedback records written since start",
              registry=registry).set_function(lambda: self.writer.written[FEEDBACK])

    def served(self, record: dict) -> None:
        """Keep a served request (sampled by its id): never blocks."""
        if not sampled(record["request_id"], self.cfg.sample_rate):
            return
        self._ids[record["request_id"]] = record["served"].get("candidate")
        while len(self._ids) > self._remember:
            self._ids.popitem(last=False)
        self.writer.offer(record)

    def candidate_of(self, request_id: str) -> tuple[bool, str | None]:
        """(known, the candidate that answered it)."""
        return (request_id in self._ids), self._ids.get(request_id)

    def feedback(self, record: dict) -> bool:
        return self.writer.offer(record, FEEDBACK)

    def close(self) -> None:
        self.writer.close()
