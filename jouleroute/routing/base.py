"""The one interface every router shares: learned LM router, baselines, oracle.

A router reads a batch of queries once and returns ``Scores`` (``jouleroute.routing.scores``);
``route`` is that score decided at one energy weight λ. Adding a router family means one
module with a ``Router`` subclass that registers itself in ``jouleroute.routing.families``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import pandas as pd

from jouleroute.routing.scores import RoutingDecisions, Scores

__all__ = ["Router", "RoutingDecisions", "Scores"]


class Router(ABC):
    """``score(queries) -> Scores``, batched; ``route(queries, lam)`` decides those scores at λ.

    ``queries`` is a frame with at least the query-table columns (``query_id``, ``task``,
    ``question``...). Every id returned is a member of ``candidates``; a router can never
    name something outside the pool.
    """

    name: str = "router"
    default_lam: float = 0.0  # the λ of ``route`` when none is given
    reference_rule: bool = False  # a fixed rule evaluate routes the test queries with (random, task_best)

    def __init__(self, candidates: Sequence[str]):
        if not candidates:
            raise ValueError("a router needs at least one candidate")
        self.candidates = list(candidates)

    @abstractmethod
    def score(self, queries: pd.DataFrame) -> Scores: ...

    def route(self, queries: pd.DataFrame, lam: float | None = None) -> RoutingDecisions:
        return self.score(queries).decide(self.default_lam if lam is None else lam)
