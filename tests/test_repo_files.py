"""What the tools write into the checkout stays out of git (read, never run: instant)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["dvc_plots/index.html", "artifacts/prepare/queries.parquet", "mlruns/mlflow.db"])
def test_tool_output_is_git_ignored(path):
    """`dvc plots show` writes dvc_plots/index.html; the pipeline artifacts/ and MLflow mlruns/."""
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
    assert done.returncode == 0, f"{path} is not git-ignored"
