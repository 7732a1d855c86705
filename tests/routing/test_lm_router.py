"""LMRouter: constrained decoding never leaves the pool, even untrained; overhead is metered and split."""

from __future__ import annotations

import math
import time

import pandas as pd
import pytest
import torch

from jouleroute.energy.base import Measurement, Meter
from jouleroute.routing.lm_decoding import CandidateTrie, TrieLogitsProcessor, candidate_token_ids
from jouleroute.routing.lm_router import LMRouter
from jouleroute.training.config import RouterConfig
from jouleroute.training.prompts import CandidateStats, RouterSpec
from jouleroute.training.tiny_model import build_tiny_model

# "gpt" is a token-prefix of "gpt-big": the trie must allow both ends
POOL = ["gpt", "gpt-big", "qwen2.5-1.5b", "x"]


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


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny model gains nothing from a second thread; on a busy 2-core box it only spins."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def untrained_dir(tmp_path_factory):
    """A random tiny chat model that has never seen a router prompt."""
    folder = build_tiny_model(tmp_path_factory.mktemp("lm_router") / "model", corpus=["a b c d"] * 4, seed=3)
    pool = {c: CandidateStats(mean_energy_j=1.0 + i, accuracy_by_task={"arith": 0.5}) for i, c in enumerate(POOL)}
    RouterSpec(candidates=POOL, paradigm="informed", max_question_chars=80, energy_source="modelled",
               energy_norm="max", label_policy="utility", pool=pool).save(folder)
    return folder


def queries(n: int) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "task": ["arith", "other"] * (n // 2),
                         "question": [f"What is {i} + {i * 7}? " * (1 + i % 5) for i in range(n)]})


def test_untrained_router_only_returns_pool_members(untrained_dir):
    router = LMRouter(untrained_dir, cfg=RouterConfig(batch_size=5))
    frame = queries(12)
    for lam in (0.0, 0.3, 5.0):
        decisions = router.route(frame, lam=lam)
        assert decisions.query_ids == list(frame["query_id"])
        assert len(decisions.candidate_ids) == 12 and set(decisions.candidate_ids) <= set(POOL)
    assert decisions.overhead_energy_source == "none" and all(math.isnan(e) for e in decisions.overhead_energy_j)


def test_trie_allows_exactly_the_continuations_of_valid_ids(untrained_dir):
    router = LMRouter(untrained_dir)
    ids = candidate_token_ids(router.tokenizer, POOL)
    trie = CandidateTrie(ids)
    eos = router.tokenizer.eos_token_id
    processor = TrieLogitsProcessor(trie, prompt_len=1, eos_ids=[eos])
    vocab = len(router.tokenizer)
    for cid, seq in ids.items():
        for depth in range(len(seq) + 1):
            prefix = torch.tensor([[0, *seq[:depth]]])
            scores = processor(prefix, torch.zeros(1, vocab))
            allowed = set(torch.nonzero(scores[0] > float("-inf")).flatten().tolist())
            expected = {s[depth] for s in ids.values() if s[:depth] == seq[:depth] and len(s) > depth}
            if trie.walk(seq[:depth]).candidate is not None:
                expected.add(eos)
            assert allowed == expected, (cid, depth)
    assert trie.resolve([*ids["gpt"], eos], {eos}) == "gpt"
    assert trie.resolve(ids["gpt-big"], {eos}) == "gpt-big"


def test_overhead_is_metered_per_batch_and_split_by_tokens(untrained_dir):
    router = LMRouter(untrained_dir, meter=FixedPowerMeter(watts=50.0), cfg=RouterConfig(batch_size=4))
    decisions = router.route(queries(8), lam=0.5)
    assert decisions.overhead_energy_source == "modelled"
    for batch in (slice(0, 4), slice(4, 8)):
        window = decisions.overhead_latency_s[batch]
        assert len(set(window)) == 1 and window[0] > 0  # each query waited the whole batch window
        assert sum(decisions.overhead_energy_j[batch]) == pytest.approx(50.0 * window[0])
    energies = decisions.overhead_energy_j[:4]
    assert len(set(round(e, 12) for e in energies)) > 1  # longer prompts carry more of the window


def test_even_split(untrained_dir):
    router = LMRouter(untrained_dir, meter=FixedPowerMeter(10.0), cfg=RouterConfig(batch_size=4, overhead_split="even"))
    energies = router.route(queries(4)).overhead_energy_j
    assert max(energies) == pytest.approx(min(energies))


def test_prompt_states_lambda_and_bad_inputs_fail_clearly(untrained_dir, tmp_path):
    router = LMRouter(untrained_dir)
    prompt = router.prompts(queries(2), lam=0.75)[0]
    assert prompt[-1]["content"].endswith("Energy weight: 0.75")
    with pytest.raises(ValueError, match="question"):
        router.route(pd.DataFrame({"query_id": ["a"], "task": ["arith"]}))
    with pytest.raises(ValueError, match="lam must be >= 0"):
        router.route(queries(2), lam=-1)
    with pytest.raises(FileNotFoundError, match="router_spec.json"):
        LMRouter(tmp_path)
