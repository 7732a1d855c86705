"""A study is a DVC repository of its own whose code deps (``../../jouleroute/...``) lie outside it, where DVC applies
no .dvcignore: a ``__pycache__`` written beside the sources would change those deps' hashes and make every study's
committed lock look stale. The venv's start-up hook (scripts/venv_path_hook.py, installed by `make setup`) sends
bytecode to the venv's own folder instead."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_importing_the_package_writes_no_bytecode_beside_its_sources(tmp_path):
    hook = Path(sysconfig.get_paths()["purelib"]) / "jouleroute-venv-path.pth"
    assert hook.exists(), f"{hook} is missing: `make setup` installs it (scripts/venv_path_hook.py)"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    code = "import sys, jouleroute.routing.scores, jouleroute.training.config; print(sys.pycache_prefix)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    prefix = Path(done.stdout.strip())
    assert prefix == Path(sys.prefix) / "pycache"
    assert list(prefix.rglob("scores*.pyc")), "the import wrote its bytecode under the venv's pycache/"
    beside = [p for folder in ("routing", "training") for p in (REPO / "jouleroute" / folder).rglob("__pycache__")]
    assert not beside, f"bytecode beside the sources, inside a study's code deps: {beside[:3]}"
