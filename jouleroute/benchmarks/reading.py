"""Reading benchmark files with errors that name the file, the row and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class BenchmarkDataError(ValueError):
    """A benchmark file is malformed. The message names the file, the 0-based row and the field."""


def data_error(source: str, row: int, field: str | None, problem: str) -> BenchmarkDataError:
    where = f"{source}, row {row}" + (f", field '{field}'" if field else "")
    return BenchmarkDataError(f"{where}: {problem}")


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """Rows of a JSONL file as ``(0-based row, object)``; blank lines are errors, not skipped,
    because skipping would shift every later row number (and so every later query id)."""
    rows: list[tuple[int, dict]] = []
    with path.open(encoding="utf-8") as handle:
        for row, line in enumerate(handle):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise data_error(path.as_posix(), row, None, f"not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise data_error(path.as_posix(), row, None, "expected a JSON object")
            rows.append((row, obj))
    return rows


def read_bbh_json(path: Path) -> list[tuple[int, dict]]:
    """BBH sub-task files are one JSON object ``{"canary", "examples": [{input, target}]}``."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchmarkDataError(f"{path.as_posix()}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    examples = doc.get("examples") if isinstance(doc, dict) else None
    if not isinstance(examples, list):
        raise BenchmarkDataError(f"{path.as_posix()}: expected an object with an 'examples' list")
    for row, example in enumerate(examples):
        if not isinstance(example, dict):
            raise data_error(path.as_posix(), row, None, "expected a JSON object")
    return list(enumerate(examples))


def field(raw: dict, name: str, kind: type | tuple[type, ...], source: str, row: int) -> Any:
    """``raw[name]``, checked to exist and to have the expected type."""
    if name not in raw:
        raise data_error(source, row, name, "missing")
    value = raw[name]
    # bool is an int subclass; an answer index of `true` is a data error, not 1.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise data_error(source, row, name, f"expected {names}, got {type(value).__name__}")
    return value


def string_list(raw: dict, name: str, source: str, row: int) -> list[str]:
    values = field(raw, name, list, source, row)
    if not values or not all(isinstance(v, str) for v in values):
        raise data_error(source, row, name, "expected a non-empty list of strings")
    return values
