"""Shared fixtures for the benchmark tests: the bundled data and real documents from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jouleroute.benchmarks import get_task

REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED = REPO_ROOT / "data" / "external" / "benchmarks"  # the data root (docs/data.md)


@pytest.fixture(scope="session")
def bundled_dir() -> Path:
    return BUNDLED


@pytest.fixture(scope="session")
def docs_by_id() -> dict[str, dict]:
    """Every bundled query document, by query id (loading all seven tasks takes well under 1 s)."""
    from jouleroute.benchmarks import TASK_NAMES

    return {d["query_id"]: d for name in TASK_NAMES for d in get_task(name).load(BUNDLED)}
