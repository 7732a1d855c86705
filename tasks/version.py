"""A stage's version: a hash of what DVC says produces its outputs, computed at run time.

The ingredients are the stage's command, the hash DVC computes for each dep (its
own code among them, and upstream outputs) and the values of its params. A
long-lived ``serve`` process therefore labels every run with the code and params
it really ran, and two runs with one version produced the same outputs.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import chdir
from pathlib import Path


def stage_version(root: str | Path, target: str) -> tuple[str, dict]:
    """``(version, ingredients)`` for a DVC target (``stage`` or ``path/dvc.yaml:stage``)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with chdir(root), Repo(".") as repo:  # DVC resolves deps against the working directory
        stage = repo.stage.collect(target)[0]
        ingredients: dict = {"cmd": stage.cmd, "deps": {}, "params": {}}
        for dep in stage.deps:
            if isinstance(dep, ParamsDependency):
                ingredients["params"].update(dep.read_params())
                continue
            try:
                info = dep.get_hash()  # DVC's own md5, cached by inode/mtime: cheap on a rerun
                ingredients["deps"][dep.def_path] = info.value if info else None
            except Exception as error:  # noqa: BLE001 - a missing upstream output is an ingredient too
                ingredients["deps"][dep.def_path] = f"missing ({type(error).__name__})"
    digest = hashlib.sha256(json.dumps(ingredients, sort_keys=True, default=str).encode()).hexdigest()
    return f"dvc-{digest[:12]}", ingredients
