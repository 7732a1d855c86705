"""A stage as a Prefect task: ``dvc repro --single-item <stage>``, whose command is ``jouleroute <stage>``.

DVC decides whether the stage is stale and keeps ``dvc.lock`` true; the task
streams the stage's output into its Prefect log while it runs, ends in a
``Completed`` state named ``Unchanged`` when DVC skipped the stage (nothing
recomputed), and fails with the stage's own error message when it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed

from tasks.logs import line_level

BIN = Path(sys.executable).parent


class StageError(RuntimeError):
    """The stage's command failed; the message is the stage's own error."""


def stage_env() -> dict[str, str]:
    """The venv's `jouleroute` and `dvc` first on PATH; no progress bars in a log."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TQDM_DISABLE": "1"}


def stream(cmd: list[str], cwd: str | Path, logger) -> tuple[int, list[str]]:
    """Run ``cmd``; each output line goes to ``logger`` as it arrives, at its own level."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=stage_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    lines: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        for line in raw.rstrip("\n").split("\r"):  # a progress bar that slipped through: keep each redraw
            if line.strip():
                lines.append(line)
                logger.log(line_level(line), line)
    return proc.wait(), lines


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Failed|Interrupt)\b")


def stage_error(name: str, lines: list[str]) -> str:
    """The stage's own message: the CLI's `jouleroute <stage>: ...` block, else a traceback's last line."""
    dvc_error = next((l for l in reversed(lines) if l.startswith("ERROR: ")), "")
    start = next((i for i, l in enumerate(lines) if l.startswith(f"jouleroute {name}: ")), None)
    if start is not None:
        block = []
        for line in lines[start:]:
            if line.startswith("ERROR: "):
                break
            block.append(line)
        return "\n".join(block)
    cause = next((l for l in reversed(lines) if _EXCEPTION.match(l)), None)
    return cause or dvc_error or f"stage {name} failed with no message (see the task log)"


@task(name="stage", cache_policy=NO_CACHE)
def dvc_stage(name: str, root: str, target: str):
    """Reproduce one stage through DVC. Returns a state whose name says whether anything ran."""
    logger = get_run_logger()
    cmd = [str(BIN / "dvc"), "repro", "--single-item", target]
    logger.info("$ %s", " ".join(cmd))
    code, lines = stream(cmd, root, logger)
    if code != 0:
        raise StageError(f"stage {name} failed: {stage_error(name, lines)}")
    text = "\n".join(lines)
    if "didn't change, skipping" in text:
        return Completed(name="Unchanged", message=f"{name}: up to date, nothing recomputed",
                         data=f"{name}: unchanged")
    if "is cached - skipping run" in text:
        return Completed(name="Restored", message=f"{name}: outputs restored from DVC's run cache, nothing recomputed",
                         data=f"{name}: restored")
    return Completed(message=f"{name}: recomputed", data=f"{name}: recomputed")
