"""Orchestration stays on top: the library never imports Prefect, and `jouleroute flow` forwards to
`jouleroute-flow` (flows/). The flows themselves are tested against a real server in tests/orchestration."""

from __future__ import annotations

import ast
import subprocess

from tests.pipeline.conftest import BIN, REPO

ORCHESTRATION = ("prefect", "prefect_dask", "distributed", "flows", "tasks")


def test_library_never_imports_prefect_or_the_flows():
    """Every import statement in jouleroute/, lazy ones inside functions included (read, not run: instant)."""
    offenders = []
    for path in sorted((REPO / "jouleroute").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] in ORCHESTRATION]
    assert offenders == []


def test_jouleroute_flow_forwards_and_checks_stage_names_before_starting_anything(tmp_path):
    done = subprocess.run([str(BIN / "jouleroute"), "flow", "run", "--stages", "evalute"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "unknown stage(s) evalute" in done.stderr and "valid: prepare, models, tournament" in done.stderr
    assert "Traceback" not in done.stderr
