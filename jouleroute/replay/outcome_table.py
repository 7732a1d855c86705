"""Read and check a user's outcome table (CSV, JSONL or parquet), one row per (query, candidate).

Minimal schema (docs/replay.md): query_id, task, prompt, candidate, correct; plus, per row,
either measured energy (energy_j, energy_source, latency_s) or what is needed to model it
(an entry for the candidate in params ``import_outcomes.models``; input_tokens and
output_tokens, or the texts to count them from). Every problem is an ``OutcomeTableError``
that names the file, the row (and line, for text formats) and the field.
"""

from __future__ import annotations

import csv
import json
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from jouleroute.replay.config import CANDIDATE_ID_PATTERN

REQUIRED_COLUMNS = ("query_id", "task", "prompt", "candidate", "correct")
OPTIONAL_COLUMNS = (
    "split", "subtask", "gold", "choices_json", "model", "output_text", "extracted_answer", "invalid",
    "input_tokens", "output_tokens", "energy_j", "energy_source", "latency_s", "ttft_s", "batch_size",
)  # fmt: skip
_TRUE = {"1", "1.0", "true", "yes"}
_FALSE = {"0", "0.0", "false", "no"}
ACCEPTED_FLAGS = "1/0, 1.0/0.0, true/false or yes/no (any case; JSON and parquet booleans too)"
ACCEPTED_CORRECT = ("a number in [0, 1] (an expected correctness: 1/0, 1.0/0.0 or a fraction such as 0.3), "
                    "true/false or yes/no (any case; JSON and parquet booleans too)")


class OutcomeTableError(ValueError):
    """Bad user input: the message names file, row and field, and says what is expected."""


@dataclass
class OutcomeTable:
    """The table as read: one python value (or None when empty) per cell, plus where each row lives."""

    path: Path
    frame: pd.DataFrame  # as read; ``cells`` turns empty cells (None, NaN, "") into None
    lines: list[int] | None  # 1-based line of each row for text formats; None for parquet

    def where(self, row: int, field: str | None = None) -> str:
        line = f" (line {self.lines[row]})" if self.lines is not None else ""
        return f"{self.path} row {row}{line}" + (f" field '{field}'" if field else "")

    def fail(self, row: int, field: str | None, message: str) -> OutcomeTableError:
        return OutcomeTableError(f"{self.where(row, field)}: {message}")

    def has(self, column: str) -> bool:
        return column in self.frame.columns

    def cells(self, column: str) -> list[object]:
        if not self.has(column):
            return [None] * len(self.frame)
        return [None if _missing(v) else v for v in self.frame[column].tolist()]


def _missing(value: object) -> bool:
    """None, NaN, pandas' NA/NaT (a nullable column read from parquet) or the empty string."""
    if isinstance(value, str):
        return value == ""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array in a cell is a value, not missing
        return False


# The first bytes of the compressed and archive formats a table is often shipped in, and how to open each.
_COMPRESSED = {b"\x1f\x8b": ("gzip", "gunzip"), b"PK\x03\x04": ("zip", "unzip"), b"BZh": ("bzip2", "bunzip2"),
               b"\xfd7zXZ\x00": ("xz", "unxz"), b"\x28\xb5\x2f\xfd": ("zstd", "unzstd")}
_PARQUET_MAGIC = b"PAR1"


def _check_bytes(path: Path, suffix: str) -> None:
    """One line for a file that is empty, compressed, binary or not UTF-8 text, before any parser sees it."""
    with path.open("rb") as file:
        head = file.read(4096)
    if not head:
        raise OutcomeTableError(f"{path}: the file is empty (0 bytes); expected a header line and one row per "
                                f"(query, candidate) (docs/replay.md)")
    for magic, (kind, tool) in _COMPRESSED.items():
        if head.startswith(magic):
            raise OutcomeTableError(f"{path}: the file is {kind}-compressed; decompress it first (`{tool}`) and "
                                    f"import the .csv, .jsonl or .parquet inside")
    if suffix == ".parquet":
        if not head.startswith(_PARQUET_MAGIC):
            raise OutcomeTableError(f"{path}: not a parquet file (it does not start with {_PARQUET_MAGIC!r})")
        return
    if head.startswith(_PARQUET_MAGIC):
        raise OutcomeTableError(f"{path}: this is a parquet file; name it .parquet")
    if b"\x00" in head:
        raise OutcomeTableError(f"{path}: a binary file (it holds NUL bytes), not {suffix[1:].upper()} text")
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise OutcomeTableError(f"{path} line {line}: not UTF-8 text (byte {data[err.start]:#04x} at offset "
                                f"{err.start}); save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`") from None


def _read_csv(path: Path) -> tuple[pd.DataFrame, list[int]]:
    try:
        with warnings.catch_warnings():  # a trailing comma's empty field: _record_lines refuses a non-empty one
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8", index_col=False)
    except pd.errors.EmptyDataError:
        raise OutcomeTableError(f"{path}: no header line (only blank lines); expected the columns "
                                f"{list(REQUIRED_COLUMNS)} (docs/replay.md)") from None
    except pd.errors.ParserError as err:
        raise OutcomeTableError(f"{path}: not valid CSV ({' '.join(str(err).split())})") from None
    return frame, _record_lines(path, len(frame))


def _record_lines(path: Path, rows: int) -> list[int]:
    """The 1-based line each record starts on (a quoted prompt may span lines, and blank lines hold no record); a
    record with more non-empty fields than the header has columns is refused (a trailing comma's empty one is not)."""
    starts, width = [], None
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        line = 1
        for record in reader:
            if record:  # pandas skips blank lines only
                width = len(record) if width is None else width
                if any(cell != "" for cell in record[width:]):
                    raise OutcomeTableError(f"{path} line {line}: {len(record)} fields where the header names "
                                            f"{width} columns")
                starts.append(line)
            line = reader.line_num + 1
    starts = starts[1:]  # the header
    return starts if len(starts) == rows else [i + 2 for i in range(rows)]  # the parsers disagree: as before


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, list[int]]:
    records, lines = [], []
    # lines end at "\n" only: str.splitlines would also cut at U+2028, U+2029 and U+0085, which JSON keeps raw
    for number, text in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            raise OutcomeTableError(f"{path} line {number}: not valid JSON ({err.msg})") from err
        if not isinstance(record, dict):
            raise OutcomeTableError(f"{path} line {number}: expected a JSON object, got {type(record).__name__}")
        records.append(record)
        lines.append(number)
    if not records:
        raise OutcomeTableError(f"{path}: no JSON objects (only blank lines); expected one object per "
                                f"(query, candidate) with {list(REQUIRED_COLUMNS)} (docs/replay.md)")
    return pd.DataFrame.from_records(records), lines


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow as pa

    try:
        return pd.read_parquet(path)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise OutcomeTableError(f"{path}: not a readable parquet file ({' '.join(str(err).split())[:200]})") from None


def read_outcome_table(path: Path) -> OutcomeTable:
    """Read CSV (all cells as text), JSONL (one object a line) or parquet; check the required columns.
    An empty, compressed, binary, non-UTF-8 or header-only file is one line naming the file."""
    if not path.is_file():
        raise OutcomeTableError(f"{path}: outcome table not found")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
        with path.open("rb") as file:
            head = file.read(8)
        kind = next((k for m, (k, _) in _COMPRESSED.items() if head.startswith(m)), None)
        extra = f" (a {kind}-compressed file: decompress it first)" if kind else ""
        raise OutcomeTableError(f"{path}: unsupported format '{suffix}'{extra}; use .csv, .jsonl or .parquet")
    _check_bytes(path, suffix)
    if suffix == ".csv":
        frame, lines = _read_csv(path)
    elif suffix == ".parquet":
        frame, lines = _read_parquet(path), None
    else:
        frame, lines = _read_jsonl(path)
    absent = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if absent:
        raise OutcomeTableError(
            f"{path}: missing column(s) {absent}; required: {list(REQUIRED_COLUMNS)} (docs/replay.md)"
        )
    if frame.empty:
        raise OutcomeTableError(f"{path}: the table has a header but no rows; add one row per (query, candidate)")
    return OutcomeTable(path, frame, lines)


def texts(table: OutcomeTable, column: str, required: bool, default: str | None = None) -> list[str | None]:
    """A text column; numbers (e.g. numeric ids in JSONL) become their string form."""
    out: list[str | None] = []
    for row, value in enumerate(table.cells(column)):
        if value is None:
            if required:
                raise table.fail(row, column, "is empty")
            out.append(default)
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            out.append(str(value))
        elif isinstance(value, float) and math.isfinite(value):  # a JSON number (42 read as 42.0 beside nulls)
            out.append(str(int(value)) if value.is_integer() else repr(value))
        else:
            raise table.fail(row, column, f"expected text, got {value!r}")
    return out


def flags(table: OutcomeTable, column: str, default: int | None = None) -> list[int]:
    """A 0/1 column (correct, invalid): accepts ``ACCEPTED_FLAGS``."""
    out = []
    for row, value in enumerate(table.cells(column)):
        if value is None and default is not None:
            out.append(default)
            continue
        text = str(value).strip().lower()
        if isinstance(value, bool):
            out.append(int(value))
        elif isinstance(value, (int, float)) and value in (0, 1):
            out.append(int(value))
        elif text in _TRUE or text in _FALSE:
            out.append(int(text in _TRUE))
        else:
            raise table.fail(row, column, f"expected {ACCEPTED_FLAGS}, got {value!r}")
    return out


def expected_correct(table: OutcomeTable, column: str) -> list[float]:
    """An expected-correctness column: a number in [0, 1] (0/1, or a fraction such as pass@1 averaged over
    samples), or true/false, yes/no."""
    out = []
    for row, value in enumerate(table.cells(column)):
        text = str(value).strip().lower()
        if isinstance(value, bool) or text in _TRUE or text in _FALSE:
            out.append(float(value) if isinstance(value, bool) else float(text in _TRUE))
            continue
        try:
            number = float(value) if value is not None else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and 0.0 <= number <= 1.0):
            raise table.fail(row, column, f"expected {ACCEPTED_CORRECT}, got {value!r}")
        out.append(number)
    return out


def numbers(table: OutcomeTable, column: str, kind: type, minimum: float, strict: bool) -> list[float | int | None]:
    """A numeric column with a lower bound (``strict``: value > minimum); empty cells are None."""
    out: list[float | int | None] = []
    for row, value in enumerate(table.cells(column)):
        if value is None:
            out.append(None)
            continue
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        whole = kind is float or number.is_integer()
        if not math.isfinite(number) or not whole or number < minimum or (strict and number == minimum):
            bound = f"> {minimum}" if strict else f">= {minimum}"
            what = "an integer" if kind is int else "a number"
            raise table.fail(row, column, f"expected {what} {bound}, got {value!r}")
        out.append(kind(number))
    return out


def check_candidates(table: OutcomeTable, candidates: list[str]) -> None:
    """Candidate ids become file names and params keys: lower-case, no spaces (as in the pool)."""
    pattern = re.compile(CANDIDATE_ID_PATTERN)
    for row, candidate in enumerate(candidates):
        if not pattern.fullmatch(candidate):  # match's $ would let a trailing newline through
            raise table.fail(row, "candidate", f"{candidate!r} must match {CANDIDATE_ID_PATTERN} (lower-case id)")


def check_unique_pairs(table: OutcomeTable, query_ids: list[str], candidates: list[str]) -> None:
    first: dict[tuple[str, str], int] = {}
    for row, pair in enumerate(zip(query_ids, candidates)):
        if pair in first:
            raise OutcomeTableError(
                f"{table.path}: duplicate (query_id, candidate) {pair}: "
                f"{table.where(first[pair])} and {table.where(row)}"
            )
        first[pair] = row


def check_complete_pool(table: OutcomeTable, query_ids: list[str], candidates: list[str]) -> None:
    """Every query answered by every candidate: the profile's grid (validate and the routers need it whole)."""
    pool = sorted(set(candidates))
    have: dict[str, set[str]] = {}
    first: dict[str, int] = {}
    for row, (query_id, candidate) in enumerate(zip(query_ids, candidates)):
        have.setdefault(query_id, set()).add(candidate)
        first.setdefault(query_id, row)
    ragged = [q for q in have if len(have[q]) < len(pool)]
    if ragged:
        q = ragged[0]
        missing = [c for c in pool if c not in have[q]]
        raise table.fail(first[q], "candidate", f"query_id {q!r} has no row for candidate(s) {missing} "
                         f"({len(ragged)} of {len(have)} queries lack a candidate); give every candidate a row for "
                         "every query, or leave those queries out (check query ids for stray spaces)")


def check_same_per_query(table: OutcomeTable, query_ids: list[str], column: str, values: list[object]) -> None:
    """A query's task, prompt, split... must be the same on every row that names it."""
    seen: dict[str, tuple[int, object]] = {}
    for row, (query_id, value) in enumerate(zip(query_ids, values)):
        if query_id not in seen:
            seen[query_id] = (row, value)
        elif seen[query_id][1] != value:
            raise table.fail(
                row, column, f"differs from {table.where(seen[query_id][0])} for the same query_id {query_id!r}"
            )
