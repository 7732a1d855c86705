"""Which stages a flow runs, read from the dvc.yaml it drives (the one list of stage names)."""

from __future__ import annotations

from pathlib import Path

import yaml


class UnknownStage(ValueError):
    pass


def dvc_yaml_for(params_path: Path, root: Path) -> Path:
    """The dvc.yaml beside the params file (studies/replay/...), else the repository's."""
    beside = params_path.parent / "dvc.yaml"
    return beside if beside.exists() else root / "dvc.yaml"


def stage_order(dvc_yaml: Path) -> list[str]:
    if not dvc_yaml.exists():
        raise FileNotFoundError(f"{dvc_yaml} not found: run from the repository root, or pass --root")
    return list((yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {}))


def choose(order: list[str], wanted: list[str] | None, dvc_yaml: Path) -> list[str]:
    unknown = [s for s in wanted or [] if s not in order]
    if unknown:
        raise UnknownStage(f"unknown stage(s) {', '.join(unknown)} in {dvc_yaml}; valid: {', '.join(order)}")
    return [s for s in order if not wanted or s in wanted]


def target(root: Path, dvc_yaml: Path, name: str) -> str:
    """The DVC target of a stage: ``name`` in the root dvc.yaml, ``path/dvc.yaml:name`` elsewhere."""
    if dvc_yaml.resolve() == (root / "dvc.yaml").resolve():
        return name
    return f"{dvc_yaml.resolve().relative_to(root.resolve())}:{name}"
