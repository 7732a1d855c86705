"""What every generated figure shares: the checkout's root, and the error that leaves a block as it is."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's jouleroute and tests, run as a script


class SourceMissing(Exception):
    """The figure's source is not on this machine (e.g. the study has not run here)."""


def need(path: Path, how: str) -> Path:
    if not path.exists():
        raise SourceMissing(f"{path.relative_to(ROOT)} is missing ({how})")
    return path
