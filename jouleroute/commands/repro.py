"""`jouleroute check-params` and `jouleroute repro`: the whole params file is checked before DVC runs.

`dvc repro` deletes a stage's outputs *before* it runs the stage's command, so a typo found by
the stage itself (``router.lamb``) used to cost the previous results. Loading the params file
into the typed models (``StageContext.load``, which the CLI does before any command) finds every
unknown section or key first; only then does `repro` hand over to `dvc repro`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from jouleroute.paths import relative_to
from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext


def check_params_command(ctx: StageContext, args: argparse.Namespace | None = None) -> int:
    # reaching here means StageContext.load validated every section of the file
    shown = ctx.params_path.relative_to(Path.cwd()) if ctx.params_path.is_relative_to(Path.cwd()) else ctx.params_path
    print(f"{shown}: ok (every section and key is known and well typed)")
    return 0


def _dvc() -> str:
    beside = Path(sys.executable).parent / "dvc"  # the venv's dvc, whatever PATH says
    return str(beside) if beside.exists() else (shutil.which("dvc") or "dvc")


def dvc_env() -> dict[str, str]:
    """The environment for dvc: this interpreter's bin/ first on PATH, because DVC runs the stage commands
    (`jouleroute <stage>`) with the PATH it is given, and a venv that is not activated is not on it."""
    here = str(Path(sys.executable).parent)
    return os.environ | {"PATH": os.pathsep.join([here, os.environ.get("PATH", "")])}


def repro_command(ctx: StageContext, args: argparse.Namespace) -> int:
    """``dvc repro [ARGS...]`` from the root (``targeted``: a study's dvc.yaml first when ARGS name no target) once
    the params file is valid and the data root holds every dataset it reads; returns dvc's exit status (1, before
    any stage runs, when a dataset is missing). A params copy drives no dvc.yaml (dvc.yaml's stages read
    params.yaml): refused in one line rather than running params.yaml."""
    from jouleroute.commands.data import missing_line, missing_required

    if ctx.namespace is not None:
        print(f"jouleroute repro: {ctx.params_path.name} is a params copy, and dvc.yaml's stages read params.yaml: "
              f"run its stages one by one (`jouleroute --params {relative_to(ctx.params_path, ctx.root)} prepare`, ...), "
              "or give it a pipeline of its own, a folder with params.yaml and dvc.yaml (docs/your-own-pool.md)",
              file=sys.stderr)
        return 1
    missing = missing_required(ctx)
    if missing:
        print(f"jouleroute repro: {missing_line(ctx, missing)}", file=sys.stderr)
        return 1
    argv = targeted(ctx, getattr(args, "dvc_args", []))
    return subprocess.call([_dvc(), "repro", *argv], cwd=ctx.root, env=dvc_env())


def pipeline_of(ctx: StageContext) -> str:
    """The dvc.yaml that ``ctx``'s params file drives, from the root: ``dvc.yaml`` or a study's."""
    from jouleroute.stages.table import dvc_yaml_for

    return dvc_yaml_for(ctx.params_path, ctx.root).resolve().relative_to(ctx.root.resolve()).as_posix()


def targeted(ctx: StageContext, argv: list[str], valued: tuple[str, ...] = ()) -> list[str]:
    """``argv`` (DVC's arguments, an option in ``valued`` taking the next one) as they are, after the pipeline's
    dvc.yaml when they name no target (DVC's default is the root's dvc.yaml). A study's stage is
    ``studies/x/dvc.yaml:stage``: a bare stage name would run the main pipeline's, so it is refused."""
    pipeline, targets, rest = pipeline_of(ctx), [], iter(argv)
    for arg in rest:
        if arg in valued:
            next(rest, None)
        elif not arg.startswith("-"):
            targets.append(arg)
    bare = [t for t in targets if ":" not in t and "/" not in t and not (ctx.root / t).exists()]
    if pipeline != "dvc.yaml" and bare:
        raise StageFailed(f"`{bare[0]}` names the main pipeline's stage; this study's is {pipeline}:{bare[0]}")
    return argv if targets else [pipeline, *argv]
