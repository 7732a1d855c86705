"""Which stages a flow runs, read from the dvc.yaml it drives (the one list of stage names:
jouleroute/stages/table.py reads it for the CLI, the flows and the tests alike)."""

from __future__ import annotations

from pathlib import Path

from jouleroute.stages.table import dvc_yaml_for, stage_order, target

__all__ = ["UnknownStage", "choose", "dvc_yaml_for", "stage_order", "target"]


class UnknownStage(ValueError):
    pass


def choose(order: list[str], wanted: list[str] | None, dvc_yaml: Path) -> list[str]:
    unknown = [s for s in wanted or [] if s not in order]
    if unknown:
        raise UnknownStage(f"unknown stage(s) {', '.join(unknown)} in {dvc_yaml}; valid: {', '.join(order)}")
    return [s for s in order if not wanted or s in wanted]
