"""Routing tests run torch on one thread: the tiny models gain nothing from a second, and on a busy
2-core machine it only spins."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
