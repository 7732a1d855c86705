"""The pipeline's stages: one module per stage of dvc.yaml, named after it.

A stage named ``x`` in any dvc.yaml (the main pipeline's or a study's) is the command ``jouleroute x``,
and its code is ``x_stage(ctx)`` in ``jouleroute/stages/x.py``; the module's docstring is its
``--help``. dvc.yaml is the only list of stages (``table.py`` reads it): adding a stage is one entry
there plus one module here. Imports are lazy so ``jouleroute --help`` stays fast (torch/TRL load only
when a stage runs).

Besides the stages, only what they share (no stage module imports another): ``context.py`` (what every
stage receives), ``table.py`` (the stage table read from dvc.yaml), ``tournament_inputs.py`` (the tournament's
inputs, which grpo's and budget's live rollouts reuse), ``router_training.py`` (what the router stages share)
and ``profile_record.py`` (what every profile source but the tournament writes besides the profile).
"""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, NamedTuple


class StageFailed(RuntimeError):
    """A stage ran but its result must not be used (e.g. validation failed); the CLI exits 1."""


class Command(NamedTuple):
    """A stage or utility: ``run(ctx[, args])``, a one-line summary and the details for --help."""

    run: Callable[..., Any]
    summary: str
    details: str


def lazy(module: str, func: str) -> Callable[..., Any]:
    """``module.func``, imported when first called."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(import_module(module), func)(*args, **kwargs)

    call.__name__ = func
    return call


def _help(path: Path) -> tuple[str, str]:
    """A stage module's docstring as (summary, details), read without importing the module."""
    if not path.exists():
        return f"(missing: {path.name}, see docs/architecture.md)", ""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first, _, rest = doc.partition("\n")
    summary = first.split(": ", 1)[-1] if first.startswith("Stage `") else first
    return summary[:1].upper() + summary[1:], rest.strip()


def _stages() -> dict[str, Command]:
    from jouleroute.stages.table import stage_names

    here = Path(__file__).parent
    return {name: Command(lazy(f"jouleroute.stages.{name}", f"{name}_stage"), *_help(here / f"{name}.py"))
            for name in stage_names()}


STAGES: dict[str, Command] = _stages()
