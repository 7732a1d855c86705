"""`jouleroute flow` forwards to `jouleroute-flow` (flows/). That the library never imports Prefect is
tests/test_architecture.py's; the flows themselves are tested against a real server in tests/orchestration."""

from __future__ import annotations

import subprocess

from tests.pipeline.conftest import BIN, REPO


def test_jouleroute_flow_forwards_and_checks_stage_names_before_starting_anything(tmp_path):
    done = subprocess.run([str(BIN / "jouleroute"), "flow", "run", "--stages", "evalute"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "unknown stage(s) evalute" in done.stderr and "valid: prepare, models, tournament" in done.stderr
    assert "Traceback" not in done.stderr
