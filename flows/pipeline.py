"""The jouleroute pipeline and the replay study as Prefect flows.

Each stage is one task run, ``dvc repro --single-item <stage>`` (``tasks.stage``):
DVC decides what is stale, so a rerun with nothing changed recomputes nothing
and each task says ``Unchanged``. Each task run's version is computed just
before it runs, from the stage's DVC deps and params (``tasks.version``). The
first failed stage fails the flow run, with the stage's error as the state message.

With ``dask_address`` or ``dask_workers``, the tournament's shard jobs run as
Prefect tasks on Dask (``flows.tournament``); DVC then records the result with
``dvc commit``, so ``dvc.lock`` stays true and a later ``dvc repro`` skips it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed

from flows.lock import pipeline_lock
from flows.stages import choose, dvc_yaml_for, stage_order, target
from jouleroute.offline import set_offline_defaults
from tasks.stage import BIN, StageError, dvc_stage, stage_env, stage_error, stream
from tasks.version import stage_version


@task(name="stage-on-dask", cache_policy=NO_CACHE)
def dask_tournament_stage(name: str, params_path: str, root: str, stage_target: str, dask_address: str | None,
                          dask_workers: int):
    """The tournament stage with its shards on Dask, then `dvc commit` so DVC knows it is done."""
    from flows.tournament import run_on_dask

    logger = get_run_logger()
    status = subprocess.run([str(BIN / "dvc"), "status", "--json", stage_target], cwd=root, env=stage_env(),
                            capture_output=True, text=True, check=True)
    if not json.loads(status.stdout or "{}"):
        return Completed(name="Unchanged", message=f"{name}: up to date, nothing recomputed", data=f"{name}: unchanged")
    where = dask_address or f"a LocalCluster of {dask_workers} worker(s) x 1 thread"
    logger.info("%s is stale (%s); running its shards on %s", name, status.stdout.strip()[:500], where)
    state = run_on_dask(params_path, root, dask_address=dask_address, n_workers=dask_workers or 2,
                        return_state=True)
    if not state.is_completed():
        raise StageError(f"stage {name} failed on Dask: {state.message}")
    code, lines = stream([str(BIN / "dvc"), "commit", "--force", stage_target], root, logger)
    if code != 0:
        raise StageError(f"stage {name}: dvc commit failed: {stage_error(name, lines)}")
    return Completed(message=f"{name}: recomputed on Dask ({where})", data=f"{name}: recomputed on Dask")


def versioned(stage_task, name: str, version: str):
    """A copy of the task carrying this run's version (``with_options`` has no ``version``)."""
    copy = stage_task.with_options(name=name, task_run_name=name)
    copy.version = version
    return copy


def run_stages(params_path: str, root: str, stages: list[str] | None, dask_address: str | None,
               dask_workers: int):
    set_offline_defaults()
    logger = get_run_logger()
    root_path = Path(root).resolve()
    params = Path(params_path) if Path(params_path).is_absolute() else root_path / params_path
    dvc_yaml = dvc_yaml_for(params, root_path)
    chosen = choose(stage_order(dvc_yaml), stages, dvc_yaml)
    if "tournament" in chosen and not (dask_address or dask_workers):
        from jouleroute.config import ParamsError, load_params

        try:
            dask_address = load_params(params).tournament.dask_address
        except ParamsError:
            dask_address = None  # the first stage reports the params error as its own failure
    results = []
    with pipeline_lock(root_path, logger):
        for name in chosen:
            stage_target = target(root_path, dvc_yaml, name)
            version, ingredients = stage_version(root_path, stage_target)  # at run time: the code and params now
            logger.info("%s: version %s from %d deps and %d params", name, version, len(ingredients["deps"]),
                        len(ingredients["params"]))
            if name == "tournament" and (dask_address or dask_workers):
                runner = versioned(dask_tournament_stage, name, version)
                state = runner(name, str(params), str(root_path), stage_target, dask_address, dask_workers,
                               return_state=True)
            else:
                runner = versioned(dvc_stage, name, version)
                state = runner(name, str(root_path), stage_target, return_state=True)
            if state.is_failed():
                error = state.result(raise_on_failure=False)
                message = str(error) if isinstance(error, BaseException) else (state.message or f"stage {name} failed")
                return Failed(message=message)
            results.append(state.result())
    recomputed = [r for r in results if r.endswith(("recomputed", "recomputed on Dask"))]
    message = f"{len(recomputed)} of {len(results)} stage(s) recomputed"
    if any(r.endswith("recomputed on Dask") for r in results):
        message += "; " + stale_after_dask(root_path, dvc_yaml, logger)
    return Completed(message=message, data=results)


def stale_after_dask(root: Path, dvc_yaml: Path, logger) -> str:
    """Say which stages the Dask tournament left stale (asked of DVC once the flow's stages have run)."""
    from flows.stale import stale_stages

    stale = stale_stages(root, dvc_yaml)
    if not stale:
        return "the tournament ran on Dask; no stage is left stale"
    text = (f"the tournament ran on Dask: its profile's energy figures differ from a serial run's, so these "
            f"stages are now stale: {', '.join(stale)} (run `jouleroute repro` or `jouleroute-flow run`)")
    logger.warning(text)
    return text


@flow(name="jouleroute-pipeline")
def pipeline(params_path: str = "params.yaml", root: str = ".", stages: list[str] | None = None,
             dask_address: str | None = None, dask_workers: int = 0):
    """The stages of dvc.yaml (the one list of stages), in its order, through DVC."""
    return run_stages(params_path, root, stages, dask_address, dask_workers)


@flow(name="jouleroute-replay-study")
def replay_study(params_path: str = "studies/replay/params.yaml", root: str = ".",
                 stages: list[str] | None = None):
    """The replay study: the stages of studies/replay/dvc.yaml, in its order, through DVC."""
    return run_stages(params_path, root, stages, None, 0)


def flow_for(params_path: Path):
    """The replay study's flow for a params file beside studies' dvc.yaml, else the pipeline."""
    from jouleroute.config import load_params

    return pipeline if load_params(params_path).profile_source == "tournament" else replay_study
