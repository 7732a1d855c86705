"""Bytecode beside the sources changes no pipeline's code deps (issue 41): every study is a pipeline of the one DVC
repository, so the root's .dvcignore (``__pycache__/``, ``*.pyc``) applies to its deps (``jouleroute/...``) as to the
main pipeline's, and no interpreter hook has to send bytecode elsewhere. This workplace sets PYTHONDONTWRITEBYTECODE,
which would hide a regression: the import here runs with it unset."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("sft", "studies/replay/dvc.yaml:sft")  # the main pipeline's and a study's: code deps in training/, routing/


def code_dep_hashes() -> dict[str, str]:
    """DVC's hash of every code dep (``jouleroute/...``) of STAGES, as `dvc status` computes it."""
    from dvc.repo import Repo

    found = {}
    with Repo(str(REPO)) as repo:
        for target in STAGES:
            for dep in repo.stage.collect(target)[0].deps:
                if dep.def_path.startswith("jouleroute/"):
                    found[f"{target} {dep.def_path}"] = dep.get_hash().value
    return found


def test_bytecode_written_beside_the_sources_leaves_the_code_deps_unchanged():
    package = REPO / "jouleroute"
    before = set(package.rglob("__pycache__"))
    hashes = code_dep_hashes()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    try:
        subprocess.run([sys.executable, "-c", "import jouleroute.routing.scores, jouleroute.training.config"],
                       cwd=REPO, env=env, check=True, timeout=300, capture_output=True)
        assert list(package.glob("training/__pycache__/config.*.pyc")), "the import wrote no bytecode beside its source"
        assert code_dep_hashes() == hashes
    finally:
        for folder in set(package.rglob("__pycache__")) - before:
            shutil.rmtree(folder, ignore_errors=True)
