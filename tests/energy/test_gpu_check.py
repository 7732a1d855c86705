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


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
def test_meter_check_reads_nvml_through_the_exporter(tmp_path):
    env = os.environ | {"OUT": str(tmp_path)}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--meter", "--repeats", "1", "--idle-seconds", "2"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "meter_nvml.json").read_text())
    assert report["exporter"]["source"] == "measured-nvml" and not report["failures"]


def test_meter_check_dry_run_reads_a_real_meter_process(tmp_path):
    """The GPU script's path without a GPU: a real `jouleroute meter` process (its counter stubbed at the NVML
    boundary, RisingCounter) read over HTTP around CPU generation windows; every window's requests share out
    exactly the exporter's joules."""
    env = os.environ | {"OUT": str(tmp_path)}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--meter", "--cpu-dry-run"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "meter_nvml.json").read_text())
    assert report["exporter"]["source"] == "measured-nvml"
    assert [w["max_new_tokens"] for w in report["windows"]] == [8, 16]
    for window in report["windows"]:
        assert window["exporter_j"] > 0 and window["attributed_sum_j"] == pytest.approx(window["exporter_j"], abs=0.02)
