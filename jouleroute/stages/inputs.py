"""A stage's inputs, checked before it runs: each bad one is one line that names the file and the fix.

The CLI checks every stage's inputs before running it (``StageContext.require_inputs``; DVC's commands go
through it too): first that they exist (context.py), then here

- a table (``.parquet``) that is empty (0 bytes), not a readable parquet file, lacks the columns every reader of
  it needs, or has no rows;
- a ``.json`` input that is empty or not JSON;
- for the stages that build on the profile after ``validate`` (``VALIDATED``), the validation verdict: they
  refuse a profile whose validation failed, is missing, or was made on another profile (its row count).

Nothing is written or deleted before these checks pass (docs/bad-input.md lists every case and its line).
"""

from __future__ import annotations

import json
from pathlib import Path

from jouleroute.stages import StageFailed


class BadInput(StageFailed):
    """An input exists but cannot be used; the message names the file and the stage that makes it."""


# The stages that read the profile, or what was built from it, after `validate`: they train, choose and score on
# it, so they run only on a profile that passed (a page stage reads evaluate's outputs, which passed this check).
VALIDATED = ("router_data", "sft", "grpo", "budget", "evaluate")
# Columns every reader of a table needs (the full schemas are validate's to check: jouleroute/schema.py).
REQUIRED_COLUMNS = {"queries": ("query_id", "task", "split")}


def check_inputs(ctx, stage: str, names: list[str]) -> None:
    """Every existing input file of ``stage`` (``paths`` names) is usable, and a profile it builds on passed
    validation; else ``BadInput`` with one line. ``ctx``: the StageContext."""
    for name in names:
        path = ctx.path(name)
        if path.is_file() and path.suffix == ".parquet":
            check_table(path, _shown(ctx, path), _remake(ctx, path), REQUIRED_COLUMNS.get(name, ()))
        elif path.is_file() and path.suffix == ".json":
            check_json(path, _shown(ctx, path), _remake(ctx, path))
    if stage in VALIDATED and "validate" in _stages(ctx):
        check_verdict(ctx)


def check_table(path: Path, shown: str, remake: str, columns: tuple[str, ...] = ()) -> int:
    """The number of rows of the parquet file at ``path``; ``BadInput`` when it cannot be read or has none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        raise BadInput(f"{shown} is empty (0 bytes): {remake}")
    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError, ValueError) as err:
        reason = " ".join(str(err).split())[:120]
        raise BadInput(f"{shown} is not a readable parquet file ({reason}): {remake}") from None
    missing = [c for c in columns if c not in meta.schema.names]
    if missing:
        raise BadInput(f"{shown} lacks the column(s) {missing}: {remake}")
    if meta.num_rows == 0:
        raise BadInput(f"{shown} has no rows: {remake}")
    return meta.num_rows


def check_json(path: Path, shown: str, remake: str) -> None:
    text = path.read_text(errors="replace")
    if not text.strip():
        raise BadInput(f"{shown} is empty: {remake}")
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        raise BadInput(f"{shown} is not valid JSON ({err.msg}, line {err.lineno}): {remake}") from None


def check_verdict(ctx) -> None:
    """The profile passed ``validate``: its report exists, says success, and counts the profile's rows."""
    report_path = ctx.path("validation_dir") / "report.json"
    profile = ctx.path("labelled_profile")
    shown, report_shown, rerun = _shown(ctx, profile), _shown(ctx, report_path), ctx.repro_hint("validate")
    if not report_path.is_file():
        raise BadInput(f"the profile {shown} has not been validated ({report_shown} is missing): run `{rerun}` "
                       "first")
    try:
        report = json.loads(report_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadInput(f"{report_shown} is not a validation report (not JSON): run `{rerun}`") from None
    if not isinstance(report, dict) or "success" not in report:
        raise BadInput(f"{report_shown} is not a validation report (no verdict): run `{rerun}`")
    if not report["success"]:
        first = next((line.strip() for line in str(report.get("summary", "")).splitlines() if line.strip()), "")
        raise BadInput(f"the profile {shown} failed validation ({first or 'see ' + report_shown}; "
                       f"{_shown(ctx, report_path.with_suffix('.html'))} has the details): fix it, then run "
                       f"`{rerun}`")
    if profile.is_file() and report.get("n_rows") is not None:
        rows = check_table(profile, shown, _remake(ctx, profile))
        if rows != report["n_rows"]:
            raise BadInput(f"the profile {shown} changed since it was validated ({report['n_rows']} rows then, "
                           f"{rows} now): run `{rerun}`")


def _stages(ctx) -> list[str]:
    from jouleroute.stages import table

    path = next((p for p in ctx.dvc_yamls if p.exists()), None)
    return table.stage_order(path) if path is not None else []


def _shown(ctx, path: Path) -> str:
    return str(path.relative_to(ctx.root)) if path.is_relative_to(ctx.root) else str(path)


def _remake(ctx, path: Path) -> str:
    producer = ctx.producer_of(path)
    return f"rerun `{ctx.repro_hint(producer)}`" if producer else "replace it"
