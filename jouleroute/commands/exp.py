"""`jouleroute exp ACTION [ARGS]`: DVC experiments on this params file's pipeline (README "Experiments").

One DVC repository holds every pipeline, so an experiment's name is unique across the main pipeline and the
studies (DVC refuses a name in use). DVC runs from the root; a study's ``studies/x/dvc.yaml`` is its target.

- ``save NAME``: `dvc exp save -n NAME PIPELINE`: that pipeline only (a study that has not run has no outputs).
- ``run ARGS``: each ``-S key=value`` is checked against the typed params first, so a typo is one line before
  DVC rewrites the file; then `dvc exp run ARGS PIPELINE`, a ``-S`` that names no file aimed at the pipeline's
  params file (DVC's default is the root's params.yaml).
- ``show ARGS``: `dvc exp show --only-changed --drop ... ARGS`: the metrics and the params you set, without the
  dependency hashes and the other pipelines' columns.
- ``apply NAME``: `dvc exp apply NAME`, checking out the outputs of this pipeline only.
- anything else goes to `dvc exp` as it is (``diff``, ``list``, ``remove``, ``branch``, ...).

DVC runs with this interpreter's bin/ first on PATH, so the stage commands are found without an
activated venv.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from jouleroute.commands.repro import _dvc, dvc_env, pipeline_of, targeted
from jouleroute.config import ParamsError, load_params
from jouleroute.stages.context import StageContext

# `dvc exp run` options that take a value (the rest of its arguments are flags or targets)
VALUED = ("-n", "--name", "-S", "--set-param", "-j", "--jobs", "-C", "--copy-paths", "-m", "--message")


def exp_command(ctx: StageContext, args: argparse.Namespace) -> int:
    argv = list(getattr(args, "exp_args", []))
    if not argv:
        print("jouleroute exp: give an action: save NAME | run -S key=value ... | show | apply NAME | "
              "(any `dvc exp` action)")
        return 2
    action, rest = argv[0], argv[1:]
    pipeline = pipeline_of(ctx)
    dvc = lambda *a: subprocess.call([_dvc(), "exp", *a], cwd=ctx.root, env=dvc_env())
    if action == "save":
        if len(rest) != 1 or rest[0].startswith("-"):
            print("jouleroute exp save: give the experiment's name, e.g. `jouleroute exp save baseline`")
            return 2
        return dvc("save", "-n", rest[0], pipeline)
    if action == "run":
        problem = check_overrides(ctx.params_path, rest)
        if problem:
            print(f"jouleroute exp run: {problem}", file=sys.stderr)
            return 1
        return dvc("run", *targeted(ctx, aimed(rest, str(Path(pipeline).parent / "params.yaml")), VALUED))
    if action == "show":
        return dvc("show", "--only-changed", "--drop", dropped(pipeline), *rest)
    if action == "apply":
        if len(rest) != 1 or rest[0].startswith("-"):
            print("jouleroute exp apply: give one experiment's name, e.g. `jouleroute exp apply baseline`")
            return 2
        return apply(ctx.root, rest[0], pipeline)
    return dvc(action, *rest)


def aimed(argv: list[str], params_file: str) -> list[str]:
    """``argv`` with each ``-S key=value`` (``--set-param key=value``, ``--set-param=key=value``) that names no file
    aimed at ``params_file``; one that names its file (``FILE:key=value``) stays as written."""
    def aim(value: str) -> str:
        return value if ":" in value.partition("=")[0] else f"{params_file}:{value}"

    out, rest = [], iter(argv)
    for arg in rest:
        if arg in ("-S", "--set-param"):
            out += [arg, aim(next(rest, ""))]
        elif arg.startswith("--set-param="):
            out.append("--set-param=" + aim(arg.split("=", 1)[1]))
        else:
            out.append(arg)
    return out


def dropped(pipeline: str) -> str:
    """`dvc exp show --drop`: every column named by a path (dependency hashes, other pipelines' ``file:key``
    params and metrics) but this pipeline's own ``FILE:key`` (a study's params and metrics beside its dvc.yaml)."""
    folder = Path(pipeline).parent.as_posix()
    return ".*/.*" if folder == "." else f"(?!{re.escape(folder)}/[^/]*:).*/.*"


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


def _holds(raw: dict, key: str) -> bool:
    """Whether the params ``raw`` hold the dotted ``key`` (a list index counts)."""
    node = raw
    for part in key.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    return True


NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def override_value(text: str):
    """An -S value as DVC (Hydra) reads it: YAML, except that ``1e-3`` is a number (YAML 1.1 wants ``1.0e-3``)."""
    value = yaml.safe_load(text)
    return float(text) if isinstance(value, str) and NUMBER.fullmatch(text.strip()) else value


def check_overrides(params_path: Path, argv: list[str]) -> str | None:
    """None when the params with every override applied are valid, else one line naming the override."""
    assignments = overrides(argv, params_path)
    if not assignments:
        return None
    raw = yaml.safe_load(params_path.read_text()) or {}
    absent = []
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        # Hydra's prefixes, as DVC reads -S: `+key` adds a key the file lacks, `++key` sets it either way, `~key`
        # deletes it; a plain `key` must already be in the file
        prefix = next((p for p in ("++", "+", "~") if key.startswith(p)), "")
        key = key[len(prefix):]
        if not key or not (sep or prefix == "~"):
            return f"-S {assignment}: write it as key=value, e.g. -S evaluate.accuracy_tolerance=0.02"
        there = _holds(raw, key)
        if prefix == "" and not there:  # a typo is named below; a right key the file lacks needs Hydra's +
            absent.append(assignment)
        if prefix == "+" and there:
            return f"-S {assignment}: {key} is already in {params_path.name}; set it with -S {assignment[1:]}"
        node, parts = raw, key.split(".")
        for i, part in enumerate(parts):
            if isinstance(node, list) and not (part.isdigit() and int(part) < len(node)):
                return (f"-S {assignment}: {'.'.join(parts[:i])} is a list of {len(node)}: index it with 0 to "
                        f"{len(node) - 1}, got {part!r}")
            if i == len(parts) - 1:
                break
            if isinstance(node, list):
                node = node[int(part)]
            else:
                if not isinstance(node.get(part), (dict, list)):
                    node[part] = {}  # an added key's parent: absent, or null (`target:`)
                node = node[part]
        last = parts[-1]
        if prefix == "~":
            if isinstance(node, dict):
                node.pop(last, None)
            continue
        try:
            parsed = override_value(value)
        except yaml.YAMLError as error:
            return f"-S {assignment}: {value!r} is no value ({str(error).splitlines()[0]})"
        node[int(last) if isinstance(node, list) else last] = parsed
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
    if absent:
        return (f"-S {absent[0]}: {params_path.name} has no {absent[0].partition('=')[0]} yet; add it with "
                f"-S +{absent[0]} (DVC's -S is Hydra's override syntax; nothing was changed)")
    return None
