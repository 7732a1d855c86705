"""Shared fixtures for the replay tests: the repository root and a hand-made ML.ENERGY reference folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_GPU = "Test GPU 80GB"
FAKE_MODEL = "org/fake-7b"


def write_reference(root: Path, model: str, bs: int, tp: int, energy_req_j: float, avg_out: float, tpot_s: float,
                    tput: float, workload: str = "chat", gpu: str = FAKE_GPU) -> Path:
    """One ML.ENERGY-shaped configuration file with round numbers, so the arithmetic can be done by hand."""
    folder = root / "llm_text_generation" / workload / gpu / model
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bs{bs}+tp{tp}+pp1.json"
    path.write_text(json.dumps({
        "Model": model, "GPU": gpu, "TP": tp, "PP": 1, "Energy/req (J)": energy_req_j, "Avg TPOT (s)": tpot_s,
        "Token tput (tok/s)": tput, "Avg Output Tokens": avg_out, "Avg BS (reqs)": bs, "Max BS (reqs)": bs,
    }))
    return path


@dataclass(frozen=True)
class FakeReference:
    """A hand-made ML.ENERGY folder: ``model`` on ``gpu`` measured at bs64 and bs192; ``write`` adds more."""

    root: Path
    model: str = FAKE_MODEL
    gpu: str = FAKE_GPU
    write: Callable[..., Path] = staticmethod(write_reference)


@pytest.fixture
def fake_ref(tmp_path: Path) -> FakeReference:
    """org/fake-7b at bs64 (J_out = 100 J / 50 tok = 2 J, TPOT 0.05 s, 1000 tok/s) and at bs192 (J_out = 1 J)."""
    root = tmp_path / "mlenergy"
    write_reference(root, FAKE_MODEL, bs=64, tp=1, energy_req_j=100.0, avg_out=50.0, tpot_s=0.05, tput=1000.0)
    write_reference(root, FAKE_MODEL, bs=192, tp=1, energy_req_j=50.0, avg_out=50.0, tpot_s=0.08, tput=2400.0)
    return FakeReference(root)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
