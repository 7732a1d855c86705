"""One seeding helper (jouleroute.provenance): seed_everything for a stage, seeded for a block."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import numpy as np
import torch

from jouleroute.provenance import seed_everything, seeded

LIB = Path(__file__).resolve().parents[1] / "jouleroute"
GLOBAL_SEEDERS = {("torch", "manual_seed"), ("random", "seed"), ("np.random", "seed"), ("numpy.random", "seed"),
                  ("torch.cuda", "manual_seed"), ("torch.cuda", "manual_seed_all")}


def _draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_a_seeded_block_repeats_and_leaves_the_callers_streams_alone():
    seed_everything(7)
    expected_after = _draws()
    seed_everything(7)
    with seeded(3):
        first = _draws()
    assert _draws() == expected_after  # the caller's streams continue as if the block never ran
    with seeded(3):
        assert _draws() == first
    with seeded(4):
        assert _draws() != first


def test_only_provenance_seeds_the_global_generators():
    """A local torch.Generator(...).manual_seed is fine; seeding a global generator happens in one place."""
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        if path.name == "provenance.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = ast.unparse(node.func.value)
                if (owner, node.func.attr) in GLOBAL_SEEDERS:
                    offenders.append(f"{path.relative_to(LIB.parent)}:{node.lineno} {ast.unparse(node.func)}")
    assert offenders == [], offenders
