"""LMRouter: scoring in one pass never leaves the pool, equals unbatched scoring, decides λ outside the model."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
import torch

from jouleroute.energy.base import Measurement, Meter
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.scores import Scores
from jouleroute.routing.lm.spec import SYSTEM_MESSAGE, RouterSpec, label_token_ids
from tests.conftest import tiny_router_base

POOL = ["gpt", "gpt-big", "qwen2.5-1.5b", "x"]
ENERGY = {"gpt": 1.0, "gpt-big": 8.0, "qwen2.5-1.5b": 3.0, "x": 20.0}
class FixedPowerMeter(Meter):
    """A real (if simple) Meter: energy = constant power x wall time, labelled 'modelled'."""

    source = "modelled"

    def __init__(self, watts: float):
        self.watts = watts

    def begin(self) -> object:
        return time.perf_counter()

    def end(self, token: object) -> Measurement:
        elapsed = time.perf_counter() - float(token)
        return Measurement(time_s=elapsed, energy_j=self.watts * elapsed, source=self.source)

    def measure_idle_power_w(self, seconds: float) -> float:
        return 0.0


def spec(**changes) -> RouterSpec:
    fields = dict(candidates=POOL, labels=["A", "B", "C", "D"], energy_source="modelled", energy_norm="max",
                  label_policy="utility", lambdas=[0.0, 0.5, 2.0], utility_scale=10.0, max_query_tokens=24,
                  task_energy_j={"arith": ENERGY}, pool_energy_j=ENERGY,
                  scaffolds={"arith": {"prefix": "Solve this, step by step please:", "suffix": ""}})
    return RouterSpec(**{**fields, **changes})


@pytest.fixture(scope="module")
def untrained_dir(tmp_path_factory):
    """A random tiny chat model that has never seen a router prompt."""
    folder = tiny_router_base(tmp_path_factory.mktemp("lm_router") / "model", ["a b c d"] * 4, seed=3)
    spec().save(folder)
    return folder


def queries(n: int) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "task": ["arith", "other"] * (n // 2),
                         "question": [f"What is {i} + {i * 7}? " * (1 + i % 5) for i in range(n)]})


def test_untrained_router_only_returns_pool_members(untrained_dir):
    router = LMRouter(untrained_dir, cfg=RouterConfig(batch_size=5))
    frame = queries(12)
    for lam in (0.0, 0.3, 2.0):
        decisions = router.route(frame, lam=lam)
        assert decisions.query_ids == list(frame["query_id"])
        assert len(decisions.candidate_ids) == 12 and set(decisions.candidate_ids) <= set(POOL)
    assert decisions.overhead_energy_source == "none" and all(math.isnan(e) for e in decisions.overhead_energy_j)


def test_batched_scoring_equals_one_unpadded_pass_per_query(untrained_dir):
    """Left padding, explicit positions and logits_to_keep=1 change nothing: each query's label
    logits equal those of a plain forward pass over its prompt alone."""
    router = LMRouter(untrained_dir, cfg=RouterConfig(batch_size=3, quantize="none"))  # int8: tests/routing/test_fast_router.py
    frame = queries(6)
    batched = router.score(frame).merit
    for row, prompt in zip(batched, router.prompts(frame)):
        with torch.inference_mode():
            alone = router.model(input_ids=torch.tensor([prompt])).logits[0, -1, router.label_ids].float().numpy()
        assert np.allclose(row, alone, atol=1e-4)
    assert len({int(np.argmax(row)) for row in batched}) > 1 or np.ptp(batched) > 0  # not a constant output


def test_one_pass_serves_every_lambda_and_cheaper_choices_follow_larger_lambda(untrained_dir):
    router = LMRouter(untrained_dir)
    frame = queries(10)
    first = router.score(frame)
    energy = {lam: [ENERGY[c] for c in router.route(frame, lam=lam).candidate_ids] for lam in (0.0, 0.1, 0.5, 2.0)}
    assert router.score(frame) is first  # the sweep re-decided from the memoized scores
    for low, high in zip((0.0, 0.1, 0.5), (0.1, 0.5, 2.0)):
        assert all(b <= a for a, b in zip(energy[low], energy[high]))
    assert energy[2.0] != energy[0.0] or set(energy[0.0]) == {1.0}


def test_scores_taken_without_a_meter_are_not_reused_once_one_is_attached(untrained_dir):
    # the deployment scores val unmetered (per-query energy), then meters the champion's own cost on the same
    # queries: the memo must not hand back the NaN joules of the unmetered pass
    router = LMRouter(untrained_dir)
    frame = queries(6)
    unmetered = router.score(frame)
    assert all(math.isnan(e) for e in unmetered.overhead_energy_j)
    router.meter = FixedPowerMeter(5.0)
    metered = router.score(frame)
    assert metered is not unmetered and metered.overhead_energy_source == "modelled"
    assert all(math.isfinite(e) and e >= 0 for e in metered.overhead_energy_j)
    assert router.score(frame) is metered  # and with the meter still attached, the memo serves again


def test_decide_breaks_ties_toward_cheaper_candidates():
    def scores(energy):
        return Scores(["q"], ["a", "b", "c"], np.array([[1.0, 1.0, 0.0]]), np.array(energy), np.array(energy), scale=10.0)

    assert scores([[0.9, 0.2, 0.1]]).choices(0.0).tolist() == [1]
    assert scores([[0.9, 0.2, 0.1]]).choices(1.0).tolist() == [2]


def test_labels_must_be_single_distinct_tokens(untrained_dir):
    router = LMRouter(untrained_dir)
    with pytest.raises(ValueError, match="share the label"):
        spec(labels=["A", "A", "C", "D"])
    with pytest.raises(ValueError, match="single tokens"):
        label_token_ids(router.tokenizer, ["A", "B", "C", "not-one-token-at-all"], POOL)


def test_scaffold_is_stripped_and_query_cut_to_its_token_budget(untrained_dir):
    router = LMRouter(untrained_dir)
    long = "Solve this, step by step please: " + "alpha beta gamma delta " * 40 + "the end"
    prompt = router.tokenizer.decode(router.prompts(pd.DataFrame(
        {"query_id": ["a"], "task": ["arith"], "question": [long]}))[0])
    assert "step by step" not in prompt and "[...]" in prompt and prompt.rstrip().endswith("assistant")
    user = prompt.split("user\n")[1].split("<|im_end|>")[0]
    marker = len(router.tokenizer(" [...] ", add_special_tokens=False)["input_ids"])
    assert len(router.tokenizer(user, add_special_tokens=False)["input_ids"]) <= router.spec.max_query_tokens + marker + 2


def test_overhead_is_metered_per_batch_and_split_by_tokens(untrained_dir):
    router = LMRouter(untrained_dir, meter=FixedPowerMeter(watts=50.0), cfg=RouterConfig(batch_size=4))
    decisions = router.route(queries(8), lam=0.5)
    assert decisions.overhead_energy_source == "modelled"
    batches: dict[float, list[int]] = {}  # queries are batched by prompt length: group them by their window
    for i, window in enumerate(decisions.overhead_latency_s):
        batches.setdefault(window, []).append(i)
    assert sorted(len(b) for b in batches.values()) == [4, 4]  # each query waited its whole batch window
    for window, members in batches.items():
        assert window > 0 and sum(decisions.overhead_energy_j[i] for i in members) == pytest.approx(50.0 * window)
    energies = [decisions.overhead_energy_j[i] for i in next(iter(batches.values()))]
    assert len(set(round(e, 12) for e in energies)) > 1  # longer prompts carry more of the window


def test_even_split(untrained_dir):
    router = LMRouter(untrained_dir, meter=FixedPowerMeter(10.0), cfg=RouterConfig(batch_size=4, overhead_split="even"))
    energies = router.route(queries(4)).overhead_energy_j
    assert max(energies) == pytest.approx(min(energies))


def test_bad_inputs_fail_clearly(untrained_dir, tmp_path):
    router = LMRouter(untrained_dir)
    with pytest.raises(ValueError, match="question"):
        router.route(pd.DataFrame({"query_id": ["a"], "task": ["arith"]}))
    with pytest.raises(ValueError, match="outside the router's trained range"):
        router.route(queries(2), lam=5.0)
    with pytest.raises(FileNotFoundError, match="router_spec.json"):
        LMRouter(tmp_path)
