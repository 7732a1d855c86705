"""The one interface every router shares: learned LM router, baselines, oracle."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd


@dataclass
class RoutingDecisions:
    """What a router chose for a batch of queries, and what choosing cost.

    ``overhead_energy_j`` / ``overhead_latency_s`` are per query, measured with the
    tournament's meters; zero-cost routers (oracle, "always X") report zeros with
    ``overhead_energy_source = "none"``.
    """

    query_ids: list[str]
    candidate_ids: list[str]
    overhead_latency_s: list[float] = field(default_factory=list)
    overhead_energy_j: list[float] = field(default_factory=list)
    overhead_energy_source: str = "none"


class Router(ABC):
    """``route(queries) -> candidate ids``, batched.

    ``queries`` is a frame with at least the query-table columns
    (``query_id``, ``task``, ``question``...). Every id returned is a member of
    ``candidates``; a router can never name something outside the pool.
    """

    name: str = "router"

    def __init__(self, candidates: Sequence[str]):
        if not candidates:
            raise ValueError("a router needs at least one candidate")
        self.candidates = list(candidates)

    @abstractmethod
    def route(self, queries: pd.DataFrame) -> RoutingDecisions: ...
