"""scripts/gpu_check.sh end to end: measured NVML energy of a generation batch on a real GPU.

Marked ``gpu``; skipped where torch sees no CUDA device (as on the development machine).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
def test_gpu_check_measures_positive_nvml_energy(tmp_path):
    env = os.environ | {"OUT": str(tmp_path)}
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--windows", "2", "--idle-seconds", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["source"] == "measured-nvml"
    assert all(w["energy_j"] > 0 and w["source"] == "measured-nvml" for w in report["windows"])
