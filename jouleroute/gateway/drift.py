"""Drift, visible while serving: is the traffic still like the queries the deployed policy learned from?

For each request (never on its path: a bounded queue and one thread, a full queue skips and counts), the prompt the
router reads is embedded as the routers embed queries (``baselines.embedding``) and compared with the training
queries: its distance to the nearest one (1 − cosine similarity). A request **drifts** when that distance is above
the ``quantile`` of the training queries' own nearest-neighbour distances (each to its nearest *other* training
query): by construction about 1 − quantile of training-like traffic drifts, so a share well above it says the
traffic moved. ``/metrics``: ``jouleroute_gateway_drift_share`` over the last ``window`` requests seen, the
threshold, the requests skipped, and the recent task mix beside the training mix (``..._task_share`` by task and
source) where the task is known.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections import Counter, deque

import numpy as np
from pydantic import Field

from jouleroute.strict import StrictModel

logger = logging.getLogger(__name__)


class DriftConfig(StrictModel):
    """``gateway.drift``: off by default (it embeds every request once more, off the request's path)."""

    enabled: bool = False
    quantile: float = Field(default=0.95, gt=0.0, lt=1.0)
    window: int = Field(default=500, ge=10)
    queue_size: int = Field(default=1000, ge=1)


def nearest_distances(vectors: np.ndarray, reference: np.ndarray, exclude_self: bool = False) -> np.ndarray:
    """1 − the cosine similarity of each unit row of ``vectors`` to its nearest row of ``reference``."""
    sims = vectors @ reference.T
    if exclude_self:
        np.fill_diagonal(sims, -np.inf)
    return 1.0 - sims.max(axis=1)


class DriftMonitor:
    def __init__(self, embed, train_texts: list[str], train_tasks: list[str], cfg: DriftConfig, registry=None,
                 compute_lock: threading.Lock | None = None):
        """``compute_lock``: the gateway's, shared with in-process generation: each request's embedding takes its
        turn on it, so its CPU time never lands in an in-process answer's metered window (``estimated`` joules are
        the process's CPU time)."""
        if len(train_texts) < 2:
            raise ValueError("drift needs at least two training queries to measure their spread")
        self.embed, self.cfg = embed, cfg
        self.train = np.asarray(embed(train_texts), dtype=np.float32)
        self.threshold = float(np.quantile(nearest_distances(self.train, self.train, exclude_self=True), cfg.quantile))
        counts = Counter(train_tasks)
        self.train_mix = {t: n / len(train_tasks) for t, n in counts.items()}
        self.recent: deque[bool] = deque(maxlen=cfg.window)
        self.recent_tasks: deque[str] = deque(maxlen=cfg.window)
        self.skipped = 0
        # the thread appends while /metrics reads: each side holds this, and a reader copies before it iterates
        self._recent_lock = threading.Lock()
        self._stopped = False
        self._compute_lock = compute_lock or contextlib.nullcontext()
        self._queue: queue.Queue = queue.Queue(maxsize=cfg.queue_size)
        self._thread = threading.Thread(target=self._run, name="jouleroute-drift", daemon=True)
        self._thread.start()
        if registry is not None:
            self.register(registry)

    def observe(self, text: str, task: str | None) -> None:
        """Queue one request's prompt (never blocks; a full queue skips it and counts)."""
        try:
            self._queue.put_nowait((text, task))
        except queue.Full:
            self.skipped += 1

    def share(self) -> float:
        with self._recent_lock:
            recent = list(self.recent)
        return float(np.mean(recent)) if recent else 0.0

    def task_mix(self) -> dict[str, float]:
        with self._recent_lock:
            known = [t for t in self.recent_tasks if t]
        return {t: n / len(known) for t, n in Counter(known).items()} if known else {}

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:  # ``stop``
                return
            text, task = item
            try:
                with self._compute_lock:
                    vector = np.asarray(self.embed([text]), dtype=np.float32)
                distance = float(nearest_distances(vector, self.train)[0])
            except Exception:  # an embedder failure must not stop the thread; the request is skipped
                logger.exception("drift: could not embed a request")
                self.skipped += 1
                continue
            with self._recent_lock:
                self.recent.append(distance > self.threshold)
                self.recent_tasks.append(task or "")

    def stop(self) -> None:
        """End the thread once the queue ahead of it is drained (a retired gateway's monitor, gateway/reload.py)."""
        if self._stopped:
            return
        self._stopped = True
        while True:  # a full queue: drop what waits, the gateway that asked is gone
            try:
                self._queue.put_nowait(None)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    self._queue.get_nowait()

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Until the queue is drained (tests and benchmarks read the gauge after it)."""
        import time

        deadline = time.monotonic() + timeout_s
        while not self._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)

    def register(self, registry) -> None:
        from prometheus_client import Gauge
        from prometheus_client.core import GaugeMetricFamily

        Gauge("jouleroute_gateway_drift_share", "Share of the last requests whose nearest training query is "
              "farther than the threshold", registry=registry).set_function(self.share)
        Gauge("jouleroute_gateway_drift_threshold", "The training queries' nearest-neighbour distance quantile",
              registry=registry).set_function(lambda: self.threshold)
        Gauge("jouleroute_gateway_drift_skipped", "Requests not checked for drift (queue full or embedding failed)",
              registry=registry).set_function(lambda: self.skipped)
        monitor = self

        class TaskMix:
            def collect(self):
                family = GaugeMetricFamily("jouleroute_gateway_task_share", "Task mix: recent traffic (where the "
                                           "task is known) beside the training queries", labels=["task", "source"])
                for task, share in monitor.task_mix().items():
                    family.add_metric([task, "recent"], share)
                for task, share in monitor.train_mix.items():
                    family.add_metric([task, "training"], share)
                yield family

        registry.register(TaskMix())
