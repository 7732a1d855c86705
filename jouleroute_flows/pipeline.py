"""The jouleroute pipeline as a Prefect flow.

Each stage is one Prefect task that calls the very stage function the CLI and
``dvc repro`` call. Two modes:

- ``via_dvc=True`` (default): each task runs ``dvc repro --single-item <stage>``,
  so DVC decides whether the stage is stale and keeps ``dvc.lock`` true. This is
  what scheduled reruns use: nothing changed means nothing recomputed.
- ``via_dvc=False``: the task calls the stage function in-process (tests, ad-hoc).

Task versions are the package version plus the git sha, so the Prefect UI shows
which code produced each run.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from prefect import flow, get_run_logger, task

from jouleroute.offline import set_offline_defaults
from jouleroute.provenance import git_sha
from jouleroute.stages import STAGES
from jouleroute.stages.context import StageContext

PIPELINE = ("prepare", "models", "tournament", "validate", "router_data", "sft", "grpo", "evaluate")
REPLAY_PIPELINE = ("replay", "validate", "router_data", "sft", "grpo", "evaluate")


def _version() -> str:
    return f"{metadata.version('jouleroute')}+{git_sha()[:12]}"


def _run_stage(name: str, params_path: str, root: str, via_dvc: bool) -> str:
    logger = get_run_logger()
    if via_dvc:
        dvc_yaml = Path(params_path).resolve().parent / "dvc.yaml"
        target = f"{dvc_yaml}:{name}" if dvc_yaml.exists() else name
        cmd = [str(Path(sys.executable).parent / "dvc"), "repro", "--single-item", target]
        logger.info("running %s", " ".join(cmd))
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        logger.info(done.stdout[-4000:])
        if done.returncode != 0:
            raise RuntimeError(f"stage {name} failed:\n{done.stderr[-4000:]}")
        return done.stdout
    ctx = StageContext.load(params_path, root)
    STAGES[name][0](ctx)
    return f"{name}: ok"


STAGE_TASKS = {
    name: task(_run_stage, name=name, version=_version(), retries=1 if name == "tournament" else 0,
               retry_delay_seconds=5, task_run_name=name)
    for name in STAGES
}


@flow(name="jouleroute-pipeline", version=_version(), log_prints=True)
def pipeline(params_path: str = "params.yaml", root: str = ".", stages: list[str] | None = None,
             via_dvc: bool = True, replay: bool = False) -> list[str]:
    """Run the stages in pipeline order (a retry of the tournament resumes from its shards)."""
    set_offline_defaults()
    order = REPLAY_PIPELINE if replay else PIPELINE
    chosen = [s for s in order if stages is None or s in stages]
    unknown = sorted(set(stages or []) - set(order))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; valid: {list(order)}")
    return [STAGE_TASKS[name](name, params_path, root, via_dvc) for name in chosen]
