"""A user's prompts, read from an OpenAI chat-completions JSONL or a parquet with a prompt column.

One JSONL line is one chat-completions request, as a client sends it to the gateway (``gateway/protocol.py``):
``{"model": ..., "messages": [{"role": ..., "content": ...}, ...]}``, ``content`` a string or a list of text
parts. The prompt is the last user message, which is also what the gateway's router reads; a request with more
turns keeps only that message, and the count of such requests is reported. A line may carry its time
(``created`` or ``timestamp``, top level or under ``metadata``: Unix seconds or ISO 8601) and its task (``task``,
as the gateway's extra field, or ``metadata.task``).

Every problem is one line naming the file and the line (JSONL, 1-based) or row (parquet, 0-based).
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from jouleroute.labels.config import PromptsConfig

TIME_KEYS = ("created", "timestamp")


class PromptFileError(ValueError):
    """A prompts file that cannot be read as queries; the message names the file and the line or row."""


@dataclass(frozen=True)
class PromptRecord:
    """One prompt as read: its text, task, time in Unix seconds (``None``: the line carries none) and place."""

    prompt: str
    task: str
    time_s: float | None
    row: int  # 0-based line (JSONL) or row (parquet)
    where: str  # "<file>:<line>" or "<file> row <n>", for errors
    earlier_turns: bool = False  # other messages than the last user one were left out


def read_prompt_records(path: Path, cfg: PromptsConfig, name: str | None = None) -> list[PromptRecord]:
    """Every prompt of ``path`` (``.jsonl``/``.json`` or ``.parquet``); ``name`` is how errors name the file."""
    name = name or str(path)
    if not path.exists():
        raise PromptFileError(f"{name}: no such file")
    if path.suffix == ".parquet":
        return parquet_records(pd.read_parquet(path), cfg, name)
    # lines end at "\n" only: str.splitlines would also cut at U+2028, U+2029 and U+0085, which JSON keeps raw
    return chat_records(path.read_text(encoding="utf-8").split("\n"), cfg, name)


def chat_records(lines: list[str], cfg: PromptsConfig, name: str) -> list[PromptRecord]:
    """One record per non-blank line of a chat-completions JSONL."""
    records = [_chat_record(line, number, cfg, name) for number, line in enumerate(lines, start=1) if line.strip()]
    if not records:
        raise PromptFileError(f"{name}: empty file: expected one chat-completions request per line")
    return records


def _chat_record(line: str, number: int, cfg: PromptsConfig, name: str) -> PromptRecord:
    where = f"{name}:{number}"
    try:
        request = json.loads(line)
    except json.JSONDecodeError as error:
        raise PromptFileError(f"{where}: not JSON ({error.msg}); each line must be one chat-completions "
                              "request") from None
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise PromptFileError(f"{where}: not a chat-completions request: 'messages' must be a non-empty list of "
                              "{role, content} objects")
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and text_of(m.get("content")).strip()]
    if not users:
        raise PromptFileError(f"{where}: no prompt: the request has no user message with text")
    metadata = request.get("metadata") if isinstance(request.get("metadata"), dict) else {}
    return PromptRecord(prompt=text_of(messages[users[-1]].get("content")).strip(),
                        task=_task(request.get("task") or metadata.get("task"), cfg, where),
                        time_s=_first_time([request, metadata], where), row=number - 1, where=where,
                        earlier_turns=len(messages) > 1)


def parquet_records(frame: pd.DataFrame, cfg: PromptsConfig, name: str) -> list[PromptRecord]:
    """One record per row of a table with a prompt column (and optionally ``task`` and a time column)."""
    if frame.empty:
        raise PromptFileError(f"{name}: empty file: no rows")
    if cfg.prompt_column not in frame.columns:
        raise PromptFileError(f"{name}: no prompt column {cfg.prompt_column!r} (prompts.prompt_column); columns: "
                              f"{', '.join(map(str, frame.columns))}")
    times = frame[cfg.timestamp_column] if cfg.timestamp_column in frame.columns else None
    tasks = frame["task"] if "task" in frame.columns else None
    records = []
    for row, prompt in enumerate(frame[cfg.prompt_column]):
        where = f"{name} row {row}"
        if not isinstance(prompt, str) or not prompt.strip():
            raise PromptFileError(f"{where}: no prompt in column {cfg.prompt_column!r}")
        time_s = None if times is None else _time_s(times.iloc[row], where, cfg.timestamp_column)
        task = _task(None if tasks is None else tasks.iloc[row], cfg, where)
        records.append(PromptRecord(prompt.strip(), task, time_s, row, where))
    return records


def text_of(content: object) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return content if isinstance(content, str) else ""


def _task(value: object, cfg: PromptsConfig, where: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return cfg.task
    if not isinstance(value, str):
        raise PromptFileError(f"{where}: 'task' must be a string, got {value!r}")
    return value


def _first_time(places: list[dict], where: str) -> float | None:
    for place in places:
        for key in TIME_KEYS:
            if place.get(key) is not None:
                return _time_s(place[key], where, key)
    return None


def _time_s(value: object, where: str, field: str) -> float:
    """Unix seconds from a number, a numeric string, an ISO 8601 string (naive: UTC) or a pandas timestamp."""
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            return _time_s(datetime.fromisoformat(value.strip().replace("Z", "+00:00")), where, field)
        except ValueError:
            pass
    raise PromptFileError(f"{where}: {field} {value!r} is no time: give Unix seconds or ISO 8601")
