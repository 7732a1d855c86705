"""Install a .pth file that puts this venv's bin/ on the PATH of every program the venv's Python runs.

DVC runs each stage's command (`jouleroute <stage>`) through the shell with the caller's PATH, so
`.venv/bin/dvc repro` or `.venv/bin/dvc exp run -S ...` without an activated venv found no
`jouleroute` (exit 127, after `-S` had already rewritten params.yaml). Python runs the `import`
line of a .pth file in site-packages at start-up: with it, the venv's programs (dvc, prefect,
jouleroute) and their children find the venv's commands first, as `activate` would arrange, without
changing the user's shell. `make setup` runs this script; it is idempotent.

The same line sends the venv's bytecode to ``.venv/pycache`` (``sys.pycache_prefix``) instead of ``__pycache__``
folders beside the sources. A study is a DVC repository of its own whose code deps (``../../jouleroute/...``) lie
outside it, where DVC applies no .dvcignore: a ``__pycache__`` written into them by any import would change their
hashes, and every study's committed lock would look stale on the machine that ran it.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

NAME = "jouleroute-venv-path.pth"
HOOK = ("import os, sys; d = os.path.dirname(os.path.abspath(sys.executable)) if sys.executable else ''; "
        "p = os.environ.get('PATH', ''); "
        "os.environ['PATH'] = p if not d or p.split(os.pathsep)[:1] == [d] else d + os.pathsep + p; "
        "sys.pycache_prefix = sys.pycache_prefix or os.path.join(sys.prefix, 'pycache')\n")


def main() -> None:
    target = Path(sysconfig.get_paths()["purelib"]) / NAME
    target.write_text(HOOK)
    print(f"{target}: the venv's bin/ goes first on PATH for the venv's programs; bytecode in the venv's pycache/")


if __name__ == "__main__":
    main()
