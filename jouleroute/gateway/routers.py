"""The one interface the gateway routes through, and adapters for the project's routers.

A ``GatewayRouter`` ranks the pool for a batch of queries, each at its own energy weight
λ, and knows the λ range it was trained for. One adapter serves every router family: it
scores the batch once (``Router.score``) and ranks with ``Scores.rank``, whose first
candidate is exactly what ``Scores.decide`` picks at that λ; the rest, best first, are the
fallbacks. Ranking is blocking torch or
numpy work: ``RouteBatcher`` runs it off the event loop, several concurrent requests per
pass, one pass at a time.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.routing.base import Router


@dataclass(frozen=True)
class Query:
    text: str  # what the router reads: the prompt, or the last user turn of a chat
    task: str  # a task name the router was trained on, or "" (unknown: pool-wide energies)
    lam: float


@dataclass(frozen=True)
class RouteResult:
    ranking: list[str]  # best first; ranking[0] is the router's choice
    compute_s: float  # the router pass this query was part of
    energy_j: float  # this query's share of the pass's energy
    energy_source: str


class GatewayRouter(ABC):
    name: str
    candidates: list[str]
    default_lam: float
    lambda_range: tuple[float, float]
    batch_size: int = 256  # queries per pass when the config does not say; an LM router says less

    def check_lambda(self, lam: float) -> float:
        low, high = self.lambda_range
        if not (np.isfinite(lam) and low - 1e-12 <= lam <= high + 1e-12):
            raise ValueError(f"energy weight {lam:g} is outside the router's trained range [{low:g}, {high:g}]")
        return float(lam)

    @abstractmethod
    def rank(self, queries: list[Query]) -> list[RouteResult]:
        """Rank the pool for each query (blocking; called from a worker thread)."""

    def tokenizer(self):
        """A tokenizer to count prompt tokens with, when the router has one."""
        return None

    def known_tasks(self) -> list[str] | None:
        """The task names the router was trained on (a request's ``task`` must be one, or empty); ``None``: any."""
        return None


_ids = itertools.count()


def query_frame(queries: Sequence[Query]) -> pd.DataFrame:
    # Fresh ids each pass: routers memoize their last batch by query id.
    return pd.DataFrame({"query_id": [f"gateway-{next(_ids)}" for _ in queries],
                         "question": [q.text for q in queries], "task": [q.task for q in queries]})


class ScoringGatewayRouter(GatewayRouter):
    """Any project ``Router``: one ``score`` pass per batch, each query ranked at its own λ.

    The ranking is ``Scores.rank``, whose first entry is exactly ``Scores.decide``'s choice:
    the gateway routes as evaluation measured. Routers that weigh no energy (``always``,
    ``random``) accept any λ of the range and ignore it.
    """

    def __init__(self, router: Router, lambda_range: tuple[float, float], default_lam: float | None = None,
                 name: str | None = None, batch_size: int | None = None) -> None:
        self.router = router
        self.name = name or router.name
        self.candidates = list(router.candidates)
        self.lambda_range = (float(lambda_range[0]), float(lambda_range[1]))
        self.default_lam = self.check_lambda(router.default_lam if default_lam is None else default_lam)
        self.batch_size = batch_size or self.batch_size

    def rank(self, queries: list[Query]) -> list[RouteResult]:
        started = time.perf_counter()
        scores = self.router.score(query_frame(queries))
        compute_s = time.perf_counter() - started
        rankings = scores.rank(np.array([q.lam for q in queries]))
        energy = scores.overhead_energy_j or [0.0] * len(queries)
        return [RouteResult(ranking, compute_s, float(e), scores.overhead_energy_source)
                for ranking, e in zip(rankings, energy)]

    def tokenizer(self):
        return getattr(self.router, "tokenizer", None)

    def known_tasks(self) -> list[str] | None:
        return trained_tasks(self.router)


def trained_tasks(router) -> list[str] | None:
    """The tasks a project router learned something per task for: an LM router's train energies per task, a
    learned baseline's per-task scaffolds, a blend's first router's; ``None`` when it has no notion of task."""
    if hasattr(router, "first"):  # BlendRouter
        return trained_tasks(router.first)
    energies = getattr(getattr(router, "spec", None), "task_energy_j", None)
    if energies:
        return sorted(energies)
    scaffolds = getattr(router, "scaffolds", None)
    return sorted(scaffolds) if scaffolds else None


def lm_gateway_router(router, default_lam: float | None = None) -> ScoringGatewayRouter:
    """The trained LM router, named after its stage folder (grpo, sft), batched as its config says."""
    return ScoringGatewayRouter(router, router.spec.lambda_range, default_lam,
                                name=f"lm:{router.model_dir.parent.name}", batch_size=router.cfg.batch_size)


class RouteBatcher:
    """Collects concurrent queries into router passes of up to ``batch_size``.

    One pass at a time, under ``compute_lock`` (shared with in-process generation): the
    meters see a whole device, so one metered window at a time is what makes a window's
    joules belong to the work inside it.
    """

    def __init__(self, router: GatewayRouter, compute_lock: threading.Lock, batch_size: int | None = None,
                 wait_s: float = 0.002) -> None:
        self.router = router
        self.lock = compute_lock
        self.batch_size = batch_size or router.batch_size
        self.wait_s = wait_s
        self.queue: asyncio.Queue | None = None
        self.worker: asyncio.Task | None = None

    async def route(self, query: Query) -> RouteResult:
        if self.worker is None or self.worker.done():
            self.queue = asyncio.Queue()
            self.worker = asyncio.create_task(self._work(self.queue))
        future = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((query, future))
        return await future

    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            batch = [await queue.get()]
            if self.wait_s and queue.qsize() < self.batch_size - 1:
                await asyncio.sleep(self.wait_s)  # let requests arriving together share the pass
            while len(batch) < self.batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            batch = [(q, f) for q, f in batch if not f.cancelled()]  # clients that went away
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(self._rank, [q for q, _ in batch])
            except Exception as error:  # the router failed: every waiting request learns why
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)

    def _rank(self, queries: list[Query]) -> list[RouteResult]:
        with self.lock:
            return self.router.rank(queries)
