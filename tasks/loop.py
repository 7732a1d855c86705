"""The loop's steps as Prefect tasks: thin wrappers around ``jouleroute.loop.iteration``'s functions, one per step.

Each takes the loop's params file and the repository root (strings: what a deployment's parameters carry) and
returns plain data; the params are read again in each task, so a task run is what that step did with the files
as they were when it ran. The pipeline's stages between fold and gate are ``flows.pipeline``'s stage tasks.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.logs import library_logs_to


def _loaded(params_path: str, root: str):
    from jouleroute.config import load_params
    from jouleroute.loop.workspace import Workspace

    ws = Workspace.of(params_path, root)
    return ws, load_params(ws.params_file)


@task(name="fold", task_run_name="fold", cache_policy=NO_CACHE)
def fold_task(params_path: str, root: str) -> dict:
    """The capture's new lines into the loop's prompts file and feedback table."""
    from jouleroute.loop.iteration import fold_step

    logger = get_run_logger()
    ws, params = _loaded(params_path, root)
    with library_logs_to(logger):
        folded = fold_step(ws, params)
    logger.info("folded %d new prompt(s), %d feedback line(s) from %s", folded.prompts, folded.feedback,
                ws.show(ws.capture_folder()))
    return folded.as_dict()


@task(name="data-version", task_run_name="data-version", cache_policy=NO_CACHE)
def data_version_task(params_path: str, root: str) -> dict:
    """The traffic's version (DVC's md5 of the prompts and feedback, the git sha)."""
    from jouleroute.loop.iteration import data_version

    ws, _ = _loaded(params_path, root)
    return data_version(ws)


@task(name="gate", task_run_name="gate", cache_policy=NO_CACHE)
def gate_task(params_path: str, root: str) -> dict:
    """The candidate against the serving policy on the newest held-out traffic (paired intervals)."""
    from jouleroute.loop.iteration import gate_step

    logger = get_run_logger()
    ws, params = _loaded(params_path, root)
    with library_logs_to(logger):
        gate = gate_step(ws, params, ws.config())
    logger.info("gate: %s (%s)", gate["decision"], gate["reason"])
    return gate


@task(name="promote", task_run_name="promote", cache_policy=NO_CACHE)
def promote_task(params_path: str, root: str, gate: dict, data: dict) -> dict:
    """Promote (a new version, then the atomic swap) or leave the served version as it is."""
    from jouleroute.loop.iteration import profile_version, promote_step

    logger = get_run_logger()
    ws, params = _loaded(params_path, root)
    data = data | profile_version(ws, params)
    with library_logs_to(logger):
        promoted = promote_step(ws, params, gate, data)
    logger.info("serving %s%s", promoted["served"], " (promoted now)" if promoted["promoted"] else " (unchanged)")
    return {**promoted, "data": data}


@task(name="record", task_run_name="record", cache_policy=NO_CACHE)
def record_task(params_path: str, root: str, folded: dict, gate: dict, promoted: dict) -> dict:
    """The decision as an MLflow run and a line of the loop's report."""
    from jouleroute.loop.fold import Folded
    from jouleroute.loop.iteration import record_step

    ws, params = _loaded(params_path, root)
    promoted = dict(promoted)
    data = promoted.pop("data")
    return record_step(ws, params, ws.config(), Folded(**folded), data, gate, promoted)
