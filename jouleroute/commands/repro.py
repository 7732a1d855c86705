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
    """``dvc repro [ARGS...]`` once the params file is valid and the data root holds every dataset it reads;
    returns dvc's exit status (1, before any stage runs, when a dataset is missing). A params copy drives no
    dvc.yaml (dvc.yaml's stages read params.yaml): refused in one line rather than running params.yaml."""
    from jouleroute.commands.data import missing_line, missing_required

    if ctx.namespace is not None:
        print(f"jouleroute repro: {ctx.params_path.name} is a params copy, and dvc.yaml's stages read params.yaml: "
              f"run its stages one by one (`jouleroute --params {ctx.params_path.name} prepare`, ...), or give it a "
              "pipeline of its own, a folder with params.yaml and dvc.yaml (docs/your-own-pool.md)", file=sys.stderr)
        return 1
    missing = missing_required(ctx)
    if missing:
        print(f"jouleroute repro: {missing_line(ctx, missing)}", file=sys.stderr)
        return 1
    repo = dvc_repo(ctx)
    return subprocess.call([_dvc(), "repro", *in_repo(getattr(args, "dvc_args", []), repo)], cwd=repo, env=dvc_env())


def dvc_repo(ctx: StageContext) -> Path:
    """The DVC repository of the pipeline ``ctx``'s params file drives: the root's, or a study's own (a subrepo)."""
    from jouleroute.stages.table import dvc_repo_of, dvc_yaml_for

    return dvc_repo_of(dvc_yaml_for(ctx.params_path, ctx.root), ctx.root)


def in_repo(argv: list[str], repo: Path) -> list[str]:
    """DVC arguments given from the working directory (``studies/x/dvc.yaml``, ``studies/x/dvc.yaml:sft``), made
    relative to ``repo``, where DVC runs; every other argument as it is."""
    moved = []
    for arg in argv:
        path, colon, stage = arg.partition(":")
        here = Path(path).resolve()
        if not arg.startswith("-") and path.endswith("dvc.yaml") and here.is_relative_to(repo) and here.exists():
            arg = here.relative_to(repo).as_posix() + colon + stage
        moved.append(arg)
    return moved
