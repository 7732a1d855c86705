"""Fold what the gateway captured into the loop's traffic: new capture lines become prompts, new feedback a table.

The gateway appends records to segment files (gateway/capture.py) and keeps appending to the newest one while it
serves. So the fold remembers, per segment, how many bytes it has consumed (``state.json``) and reads only what
follows: a rerun folds nothing twice, and a segment still being written is folded up to its last complete line
(a torn or half-written last line waits for the next fold, or, after a kill -9, is never consumed).

- **Prompts** (``data/prompts.jsonl``): each captured request as a chat-completions line, the format
  `jouleroute.labels.prompts` reads (its ``messages``, its ``created`` time and ``task``, its ``request_id`` and
  the candidate that answered it), the whole file kept in time order. A request captured with its prompt hashed
  (``keep_prompts: false``) has nothing to learn from and is counted, not folded.
- **Feedback** (``data/feedback.csv``): ``query_id, candidate_id, score`` (the ``labels.feedback`` table), the
  query id being the prompt's content-hashed id (``labels.queries.prompt_query_id``), the candidate the one that
  answered. Feedback whose request is not folded yet waits in ``state.json`` for a later fold.

Both files are rewritten atomically and deduplicated (a request id once; a feedback line once), so even a fold
killed between its writes folds nothing twice when it runs again. A complete line that is JSON but not a record
the gateway writes (no request id, a time or score that is not a number, a task that is not a string) stops the
fold before it writes anything, with one line naming the segment, the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jouleroute.atomic import atomic_write_text
from jouleroute.gateway.capture import CAPTURE, FEEDBACK, numbered_json_lines
from jouleroute.labels.prompts import text_of
from jouleroute.loop.workspace import jsonl_records

logger = logging.getLogger(__name__)


class CaptureRecordError(ValueError):
    """A capture or feedback line the fold cannot use; the message names the segment, the line and the field."""

FEEDBACK_COLUMNS = ("query_id", "candidate_id", "score", "request_id", "created")


@dataclass
class Folded:
    """What one fold did: lines consumed, prompts and feedback added, and what it could not use (counted)."""

    segments: dict[str, int] = field(default_factory=dict)  # segment -> complete lines read this time
    prompts: int = 0  # new prompt lines
    feedback: int = 0  # new feedback rows
    hashed: int = 0  # captured with the prompt hashed: nothing to learn from
    no_prompt: int = 0  # a capture line with no user message
    unreadable: int = 0  # complete lines that are not JSON (a torn line that got a newline after it)
    pending_feedback: int = 0  # feedback waiting for its request to be folded
    duplicates: int = 0  # request ids or feedback lines folded before

    @property
    def added(self) -> bool:
        return bool(self.prompts or self.feedback)

    def as_dict(self) -> dict:
        return asdict(self)


def fold(capture: Path, prompts_file: Path, feedback_file: Path, state_file: Path, prompts_cfg) -> Folded:
    """Fold the new lines of ``capture``'s segments (module doc). ``prompts_cfg``: the params' ``prepare.prompts``,
    which decides a line's task when it names none (and so its query id)."""
    state = json.loads(state_file.read_text()) if state_file.is_file() else {}
    offsets: dict[str, int] = state.get("segments", {})
    done = Folded()
    lines = {CAPTURE: [], FEEDBACK: []}
    for stream in (CAPTURE, FEEDBACK):
        for path in sorted(Path(capture).glob(f"{stream}-*.jsonl")):
            records, consumed, bad = _new_records(path, offsets.get(path.name, 0), stream)
            if consumed:
                offsets[path.name] = offsets.get(path.name, 0) + consumed
                done.segments[path.name] = len(records) + bad
            done.unreadable += bad
            lines[stream] += records

    prompts = jsonl_records(prompts_file)
    seen = {line.get("request_id") for line in prompts}
    for record in lines[CAPTURE]:
        line = prompt_line(record)
        if line is None:
            done.hashed += "prompt_sha256" in record
            done.no_prompt += "prompt_sha256" not in record
        elif line["request_id"] in seen:
            done.duplicates += 1
        else:
            seen.add(line["request_id"])
            prompts.append(line)
            done.prompts += 1
    prompts.sort(key=lambda line: line.get("created") or 0)

    ids = _query_ids(prompts, prompts_cfg, prompts_file)
    rows = _read_feedback(feedback_file)
    have = {(r["request_id"], r["created"], r["score"]) for r in rows}
    waiting = []
    for record in state.get("pending_feedback", []) + lines[FEEDBACK]:
        key = (str(record.get("request_id")), str(record.get("created")), str(float(record.get("score", 0)))
               if isinstance(record.get("score"), (int, float)) else str(record.get("score")))
        query = ids.get(record.get("request_id"))
        candidate = record.get("candidate") or (query or {}).get("candidate")
        if query is None or not candidate:
            waiting.append(record)
        elif key in have:
            done.duplicates += 1
        else:
            have.add(key)
            rows.append({"query_id": query["query_id"], "candidate_id": candidate, "score": key[2],
                         "request_id": key[0], "created": key[1]})
            done.feedback += 1
    done.pending_feedback = len(waiting)

    prompts_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(prompts_file, "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"
                                            for line in prompts))
    atomic_write_text(feedback_file, _csv(rows))
    state_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(state_file, json.dumps({"segments": offsets, "pending_feedback": waiting}, indent=1,
                                             sort_keys=True) + "\n")
    logger.info("folded %d prompt(s) and %d feedback line(s) from %d segment(s)%s", done.prompts, done.feedback,
                len(done.segments), f"; {done.hashed} captured with hashed prompts (not learnable)"
                if done.hashed else "")
    return done


def _new_records(path: Path, offset: int, stream: str) -> tuple[list[dict], int, int]:
    """The records of ``path`` after byte ``offset``, up to its last complete line: (records, bytes, unreadable),
    each record checked (module doc)."""
    with open(path, "rb") as handle:
        first = handle.read(offset).count(b"\n") + 1  # the line number of the first new line
        blob = handle.read()
    end = blob.rfind(b"\n") + 1  # what follows the last newline is a line still being written (or torn)
    records, bad = numbered_json_lines(blob[:end], first)
    for number, record in records:
        _check(record, f"{path}:{number}", stream)
    return [record for _, record in records], end, bad


def _check(record: dict, where: str, stream: str) -> None:
    """One line naming ``where`` and the field when ``record`` is not one the gateway writes (module doc)."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
    problems = {"request_id": "a non-empty string" if not isinstance(record.get("request_id"), str)
                or not record["request_id"] else None,
                "created": "a number (Unix seconds)" if record.get("created") is not None
                and not number(record["created"]) else None}
    if stream == CAPTURE:
        task = record.get("task")
        problems["task"] = "a string" if task is not None and not isinstance(task, str) else None
    else:
        score = record.get("score")
        problems["score"] = "a number in [0, 1]" if not number(score) or not 0 <= score <= 1 else None
    for name, expected in problems.items():
        if expected:
            raise CaptureRecordError(f"{where}: {name!r} must be {expected}, got {record.get(name)!r} (nothing was "
                                     "folded: fix or delete that line, then fold again)")


def prompt_line(record: dict) -> dict | None:
    """A capture record as a prompts-file line (a chat-completions request with its time and task), or ``None``
    when the record kept no prompt (hashed), has no user text, or the gateway refused it as malformed (a 4xx: not
    traffic to learn from). A request the gateway failed to answer (a 5xx, an overloaded upstream) is still a
    user's prompt: the tournament answers it with every candidate."""
    status = (record.get("served") or {}).get("status")
    if isinstance(status, int) and 400 <= status < 500:
        return None
    messages = record.get("messages")
    if messages is None and isinstance(record.get("prompt"), str):  # /v1/completions: the prompt is the user turn
        messages = [{"role": "user", "content": record["prompt"]}]
    if not isinstance(messages, list) or not any(  # the prompts reader's own test: a user message with text
            isinstance(m, dict) and m.get("role") == "user" and text_of(m.get("content")).strip() for m in messages):
        return None
    served = record.get("served") or {}
    line = {"request_id": record.get("request_id"), "created": record.get("created"), "messages": messages,
            "candidate": served.get("candidate"), "policy_version": served.get("policy_version")}
    if record.get("task"):
        line["task"] = record["task"]
    return line


def _query_ids(prompts: list[dict], cfg, where: Path) -> dict[str, dict]:
    """request id -> its query id (labels' content hash, as the prepare stage will give it) and candidate."""
    from jouleroute.labels.prompts import chat_records
    from jouleroute.labels.queries import prompt_query_id

    if not prompts:
        return {}
    records = chat_records([json.dumps(line) for line in prompts], cfg, str(where))  # numbered as it will be written
    return {line["request_id"]: {"query_id": prompt_query_id(record.task, record.prompt),
                                 "candidate": line.get("candidate")} for line, record in zip(prompts, records)}


def _read_feedback(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FEEDBACK_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: row.get(k) for k in FEEDBACK_COLUMNS} for row in rows)
    return out.getvalue()
