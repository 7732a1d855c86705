"""The one interface the gateway routes through, and adapters for the project's routers.

A ``GatewayRouter`` ranks the pool for a batch of queries, each at its own energy weight
λ, and knows the λ range it was trained for. The first candidate of a ranking is exactly
what the wrapped router's own ``route`` picks at that λ (the same public decision
function decides); the rest, best first, are the fallbacks. Ranking is blocking torch or
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


_ids = itertools.count()


def query_frame(queries: Sequence[Query]) -> pd.DataFrame:
    # Fresh ids each pass: routers memoize their last batch by query id.
    return pd.DataFrame({"query_id": [f"gateway-{next(_ids)}" for _ in queries],
                         "question": [q.text for q in queries], "task": [q.task for q in queries]})


def ranking(first: int, value: np.ndarray, candidates: Sequence[str]) -> list[str]:
    """``first`` (the router's own pick), then the others by ``value``, best first."""
    rest = [i for i in np.argsort(-value, kind="stable") if i != first]
    return [candidates[first]] + [candidates[i] for i in rest]


class LMGatewayRouter(GatewayRouter):
    """The trained LM router: one forward pass scores the pool, λ applies at decision time."""

    def __init__(self, router, default_lam: float | None = None) -> None:
        from jouleroute.routing.lm_router import LMRouter

        assert isinstance(router, LMRouter)
        self.router = router
        self.name = f"lm:{router.model_dir.parent.name}"  # the stage folder: grpo, sft
        self.candidates = list(router.candidates)
        self.lambda_range = router.spec.lambda_range
        self.default_lam = self.check_lambda(router.cfg.lam if default_lam is None else default_lam)
        self.batch_size = router.cfg.batch_size  # a forward pass: memory grows with the batch

    def rank(self, queries: list[Query]) -> list[RouteResult]:
        from jouleroute.routing.lm_scoring import decide

        s = self.router.score(query_frame(queries))
        out = []
        for i, q in enumerate(queries):
            first = int(decide(s.scores[i:i + 1], s.energy[i:i + 1], q.lam, s.utility_scale)[0])
            value = s.scores[i] - q.lam * s.utility_scale * s.energy[i]
            out.append(RouteResult(ranking(first, value, self.candidates), s.overhead_latency_s[i],
                                   s.overhead_energy_j[i], s.overhead_energy_source))
        return out

    def tokenizer(self):
        return self.router.tokenizer


class LearnedGatewayRouter(GatewayRouter):
    """A fitted kNN / MLP / MF baseline: p_correct − λ·normalized energy, as in evaluation."""

    def __init__(self, router, lambda_range: tuple[float, float], default_lam: float | None = None) -> None:
        from jouleroute.routing.learned import LearnedRouter

        assert isinstance(router, LearnedRouter)
        self.router = router
        self.name = router.name
        self.candidates = list(router.candidates)
        self.lambda_range = (float(lambda_range[0]), float(lambda_range[1]))
        self.default_lam = self.check_lambda(router.lam if default_lam is None else default_lam)

    def rank(self, queries: list[Query]) -> list[RouteResult]:
        from jouleroute.routing.scoring import choose, normalize_energy

        s = self.router.predict_scores(query_frame(queries))
        norm = normalize_energy(s.energy_j, s.energy_norm)
        out = []
        for i, q in enumerate(queries):
            first = int(choose(s.p_correct[i:i + 1], s.energy_j[i:i + 1], q.lam, s.energy_norm)[0])
            value = s.p_correct[i] - q.lam * norm[i]
            out.append(RouteResult(ranking(first, value, self.candidates), s.overhead_latency_s[i],
                                   s.overhead_energy_j[i], s.overhead_energy_source))
        return out


class PlainGatewayRouter(GatewayRouter):
    """Any ``Router`` without an energy weight (``always``, ``random``): λ is accepted and unused."""

    def __init__(self, router: Router, lambda_range: tuple[float, float] = (0.0, 0.0)) -> None:
        self.router = router
        self.name = router.name
        self.candidates = list(router.candidates)
        self.lambda_range = lambda_range
        self.default_lam = lambda_range[0]

    def rank(self, queries: list[Query]) -> list[RouteResult]:
        started = time.perf_counter()
        d = self.router.route(query_frame(queries))
        each = (time.perf_counter() - started) / len(queries)
        out = []
        for i, choice in enumerate(d.candidate_ids):
            rest = [c for c in self.candidates if c != choice]
            energy = d.overhead_energy_j[i] if d.overhead_energy_j else 0.0
            out.append(RouteResult([choice] + rest, each, energy, d.overhead_energy_source))
        return out


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
