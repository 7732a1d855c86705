"""Drift (gateway/drift.py): traffic like the training queries drifts at about 1 − quantile; traffic of a new
kind drifts; the task mix of recent traffic stands beside the training mix; a full queue skips and counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from jouleroute.gateway.drift import DriftConfig, DriftMonitor
from jouleroute.routing.baselines.embeddings import HashingEmbedder

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "mango", "grape"]


def _fruit(i: int) -> str:
    return f"how many {WORDS[i % 10]} and {WORDS[(i * 3) % 10]} does a {WORDS[(i * 7) % 10]} basket hold {i % 5}"


def test_new_traffic_drifts_and_training_like_traffic_mostly_does_not():
    train = [_fruit(i) for i in range(200)]
    registry = CollectorRegistry()
    monitor = DriftMonitor(HashingEmbedder(), train, ["fruit"] * 200, DriftConfig(window=100), registry)
    for i in range(100):
        monitor.observe(_fruit(i + 1000), "fruit")
    monitor.wait_idle()
    like = monitor.share()
    for i in range(100):
        monitor.observe(f"prove that the integral of x to the power {i} over the unit interval converges", "math")
    monitor.wait_idle()
    assert like <= 0.2 and monitor.share() == 1.0  # the window holds only the new traffic now
    text = generate_latest(registry).decode()
    assert "jouleroute_gateway_drift_share 1.0" in text
    assert 'jouleroute_gateway_task_share{source="recent",task="math"} 1.0' in text
    assert 'jouleroute_gateway_task_share{source="training",task="fruit"} 1.0' in text


def test_a_full_queue_skips_and_counts_without_blocking():
    monitor = DriftMonitor(HashingEmbedder(), [_fruit(i) for i in range(20)], ["fruit"] * 20,
                           DriftConfig(queue_size=1))
    for i in range(500):
        monitor.observe(_fruit(i), "fruit")
    assert monitor.skipped > 0


def test_metrics_read_while_the_drift_thread_appends_never_fail():
    """/metrics reads the recent window while the drift thread appends to it (a deque mutated during iteration
    raised RuntimeError before the window was read under a lock)."""
    import sys
    import threading
    import time

    monitor = DriftMonitor(HashingEmbedder(), [_fruit(i) for i in range(20)], ["fruit"] * 20,
                           DriftConfig(window=500, queue_size=100_000))
    registry = CollectorRegistry()
    monitor.register(registry)
    done = threading.Event()

    def feed() -> None:
        while not done.is_set():
            monitor.observe("x", "fruit")

    feeder = threading.Thread(target=feed, daemon=True)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a second
    errors: list[Exception] = []
    try:
        feeder.start()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                generate_latest(registry)
            except RuntimeError as error:
                errors.append(error)
    finally:
        sys.setswitchinterval(switch)
        done.set()
        feeder.join(5)
        monitor.stop()
    assert not errors, errors[:3]
    monitor._thread.join(5)
    assert not monitor._thread.is_alive()  # stop() ends the thread


def test_each_drift_embedding_takes_its_turn_on_the_compute_lock():
    """In-process answers are metered by the process's CPU time (``estimated``) under the compute lock: an embedding
    run beside one would be billed to that answer. So the drift thread embeds only while it holds the lock."""
    import threading

    lock, held = threading.Lock(), []
    hashing = HashingEmbedder()

    def embed(texts):  # the real embedder, noting whether the gateway's lock is held around each call
        held.append(lock.locked())
        return hashing(texts)

    monitor = DriftMonitor(embed, [_fruit(i) for i in range(20)], ["fruit"] * 20, DriftConfig(window=10),
                           compute_lock=lock)
    held.clear()  # the training queries are embedded at start-up, before any answer
    for i in range(5):
        monitor.observe(f"question {i}", None)
    monitor.wait_idle()
    monitor.stop()
    assert held == [True] * 5
