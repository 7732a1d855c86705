"""Fixtures of the tournament tests: a simulated GPU node on loopback (loopback_node.py)."""

from __future__ import annotations

import pytest

from tests.tournament.loopback_node import SimulatedNode


@pytest.fixture
def node():
    simulated = SimulatedNode()
    yield simulated
    simulated.close()
