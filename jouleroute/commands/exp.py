"""`jouleroute exp ACTION [ARGS]`: DVC experiments on this params file's pipeline (README "Experiments").

- ``save NAME``: `dvc exp save -n NAME` of the pipeline only. A study's run in its own DVC repository
  (studies/<name>/.dvc), so the root's experiments are the main pipeline's.
- ``run ARGS``: each ``-S key=value`` is checked against the typed params first, so a typo is one
  line before DVC rewrites params.yaml; then `dvc exp run ARGS`.
- ``show ARGS``: `dvc exp show --only-changed --drop '.*/.*' ARGS` (the metrics and the params you set).
- ``apply NAME``: `dvc exp apply NAME`, checking out the outputs of this pipeline only.
- anything else goes to `dvc exp` as it is (``diff``, ``list``, ``remove``, ``branch``, ...).

DVC runs with this interpreter's bin/ first on PATH, so the stage commands are found without an
activated venv.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import yaml

from jouleroute.commands.repro import _dvc, dvc_env, dvc_repo
from jouleroute.config import ParamsError, load_params
from jouleroute.stages.context import StageContext
from jouleroute.stages.table import dvc_yaml_for

SHOW = ["--only-changed", "--drop", ".*/.*"]


def exp_command(ctx: StageContext, args: argparse.Namespace) -> int:
    argv = list(getattr(args, "exp_args", []))
    if not argv:
        print("jouleroute exp: give an action: save NAME | run -S key=value ... | show | apply NAME | "
              "(any `dvc exp` action)")
        return 2
    action, rest = argv[0], argv[1:]
    repo = dvc_repo(ctx)  # a study's experiments run in its own DVC repository
    pipeline = str(dvc_yaml_for(ctx.params_path, ctx.root).resolve().relative_to(repo))
    dvc = lambda *a: subprocess.call([_dvc(), "exp", *a], cwd=repo, env=dvc_env())
    if action == "save":
        if len(rest) != 1 or rest[0].startswith("-"):
            print("jouleroute exp save: give the experiment's name, e.g. `jouleroute exp save baseline`")
            return 2
        return dvc("save", "-n", rest[0], pipeline)
    if action == "run":
        problem = check_overrides(ctx.params_path, rest)
        if problem:
            print(f"jouleroute exp run: {problem}")
            return 1
        return dvc("run", *in_repo_overrides(rest, repo), *([] if pipeline == "dvc.yaml" else [pipeline]))
    if action == "show":
        return dvc("show", *SHOW, *rest)
    if action == "apply":
        if len(rest) != 1 or rest[0].startswith("-"):
            print("jouleroute exp apply: give one experiment's name, e.g. `jouleroute exp apply baseline`")
            return 2
        return apply(repo, rest[0], pipeline)
    return dvc(action, *rest)


def apply(root: Path, name: str, pipeline: str) -> int:
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            repo.experiments.apply(name, targets=[pipeline])  # the checkout of this pipeline's outputs only
    except DvcException as error:
        print(f"jouleroute exp apply: {error}")
        return 1
    print(f"experiment '{name}' applied: its params, dvc.lock, metrics.json and the outputs of {pipeline}")
    return 0


def overrides(argv: list[str], params_path: Path) -> list[str]:
    """The ``key=value`` of every ``-S``/``--set-param`` aimed at ``params_path`` (or at no file)."""
    found, rest = [], iter(argv)
    for arg in rest:
        value = next(rest, "") if arg in ("-S", "--set-param") else arg.split("=", 1)[1] \
            if arg.startswith("--set-param=") else None
        if value is None:
            continue
        head, eq, val = value.partition("=")
        file, _, key = head.rpartition(":")  # `studies/replay/params.yaml:router.lam=1` names its file
        if not file or Path(file).resolve() == params_path.resolve():
            found.append(key + eq + val)
    return found


def in_repo_overrides(argv: list[str], repo: Path) -> list[str]:
    """``-S file:key=value`` with ``file`` given from the working directory, made relative to ``repo`` (where DVC
    runs: a study's own folder); ``-S key=value`` (the pipeline's own params.yaml) and other arguments unchanged."""
    moved, rest = [], iter(argv)
    for arg in rest:
        moved.append(arg)
        if arg not in ("-S", "--set-param"):
            continue
        value = next(rest, "")
        head, eq, val = value.partition("=")
        file, colon, key = head.rpartition(":")
        if file and Path(file).resolve().is_relative_to(repo):
            value = f"{Path(file).resolve().relative_to(repo).as_posix()}:{key}{eq}{val}"
        moved.append(value)
    return moved


def check_overrides(params_path: Path, argv: list[str]) -> str | None:
    """None when the params with every override applied are valid, else one line naming the override."""
    assignments = overrides(argv, params_path)
    if not assignments:
        return None
    raw = yaml.safe_load(params_path.read_text()) or {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            return f"-S {assignment}: write it as key=value, e.g. -S router.lam=1.0"
        node, parts = raw, key.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) and part.isdigit() else node.setdefault(part, {})
        last = parts[-1]
        if isinstance(node, list) and last.isdigit():
            node[int(last)] = yaml.safe_load(value)
        else:
            node[last] = yaml.safe_load(value)
    with tempfile.TemporaryDirectory() as folder:
        tried = Path(folder) / params_path.name
        tried.write_text(yaml.safe_dump(raw, sort_keys=False))
        try:
            load_params(tried)
        except ParamsError as error:
            lines = str(error).replace(f"{tried}: ", "").splitlines()  # the temporary copy's path says nothing
            return (f"{params_path.name} with -S {' -S '.join(assignments)}: "
                    + "; ".join(line.strip(" -") for line in lines[1:] or lines)
                    + f" (nothing was changed; `jouleroute check-params` checks {params_path.name})")
    return None
