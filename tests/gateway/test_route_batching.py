"""Concurrent LM-routed requests share router passes, off the event loop.

The router is a real ``LMRouter`` over a tiny random Llama (with its shared-prefix cache),
behind the gateway's ``RouteBatcher``. ``Counting`` records the size of each pass; where a test
needs a pass that takes a while, it holds the pass with a blocking sleep, standing in for a
large model on a slow CPU (the tiny model's passes take milliseconds).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from jouleroute.backends.tiny import build_tiny_llama
from jouleroute.gateway.routers import Query, RouteBatcher, lm_gateway_router
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.lm.spec import RouterSpec

POOL = ["a", "b", "c"]
ENERGY = {"a": 1.0, "b": 3.0, "c": 9.0}


@pytest.fixture(scope="module")
def lm_router(tmp_path_factory):
    folder = build_tiny_llama(tmp_path_factory.mktemp("batching") / "sft" / "model", hidden_size=32,
                              num_layers=2, num_heads=2, seed=3,
                              corpus=[f"what is {i} times {i + 2}" for i in range(20)])
    RouterSpec(candidates=POOL, labels=["A", "B", "C"], energy_source="modelled", energy_norm="max",
               label_policy="utility", lambdas=[0.0, 1.0, 2.0], utility_scale=1.0, max_query_tokens=32,
               task_energy_j={"t": ENERGY}, pool_energy_j=ENERGY).save(folder)
    return LMRouter(folder, cfg=RouterConfig(batch_size=8, quantize="none"))


class Counting:
    """The LM gateway router, recording each pass's size; ``hold_s`` keeps each pass busy that long."""

    def __init__(self, router, hold_s: float = 0.0) -> None:
        self.inner, self.hold_s, self.passes = router, hold_s, []
        self.name, self.candidates = router.name, router.candidates
        self.batch_size = router.batch_size

    def rank(self, queries):
        self.passes.append(len(queries))
        time.sleep(self.hold_s)
        return self.inner.rank(queries)


def queries(n: int) -> list[Query]:
    return [Query(text=f"what is {i} times {i + 2} and then {'more ' * (i % 5)}", task="t", lam=[0.0, 1.0, 2.0][i % 3])
            for i in range(n)]


def test_concurrent_requests_share_passes_up_to_the_batch_size(lm_router):
    router = Counting(lm_gateway_router(lm_router))
    assert router.batch_size == 8  # the LM router's own router.batch_size

    async def run():
        batcher = RouteBatcher(router, threading.Lock())
        return await asyncio.gather(*(batcher.route(q) for q in queries(20)))

    results = asyncio.run(run())
    assert sum(router.passes) == 20 and max(router.passes) <= 8
    assert len(router.passes) <= 4  # 20 requests at once: full passes, not one each
    # each request gets the ranking a pass of its own would give it, at its own λ
    alone = [router.inner.rank([q])[0].ranking for q in queries(20)]
    assert [r.ranking for r in results] == alone
    assert all(sorted(r.ranking) == sorted(POOL) for r in results)


def test_the_event_loop_stays_free_while_a_pass_runs(lm_router):
    router = Counting(lm_gateway_router(lm_router), hold_s=0.3)

    async def run():
        batcher = RouteBatcher(router, threading.Lock())
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        first = asyncio.gather(*(batcher.route(q) for q in queries(3)))
        await asyncio.sleep(0.05)  # the first pass is running now: later arrivals wait for the next one
        second = asyncio.gather(*(batcher.route(q) for q in queries(5)))
        await asyncio.gather(first, second)
        tick.cancel()
        return ticks

    ticks = asyncio.run(run())
    assert router.passes == [3, 5]  # arrivals during a pass are collected into the next pass
    assert ticks >= 15  # ~0.6 s of passes at 10 ms a tick: a blocked loop would have ticked about twice
