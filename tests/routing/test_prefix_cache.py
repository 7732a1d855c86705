"""The shared-prefix KV cache scores what the uncached pass scores, within float rounding.

Tolerance: on this test's fixed sample (a random tiny Llama with grouped-query attention,
initialised like real ones, std 0.02; its 88-token shared prefix; 48 queries of 3-30 words,
batches of 16 and of 5) the label logits of the two paths differed by at most 7.5e-8, 1.7e-7
of their spread (float32 summation order). The test allows 1e-4 of the spread, no changed
decision at any λ of the grid, and no changed favourite label relative to the sample's mean
(which differs between queries, unlike the raw argmax of an untrained model). On the real
SmolLM2 router the difference is measured by benchmarks/bench_router_scoring.py
(``prefix_cache_vs_uncached``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.lm.scoring import SharedPrefix, common_prefix, label_logits
from tests.routing.helpers import ENERGY, LAMBDAS, POOL, tiny_router, word_queries

TOLERANCE = 1e-4  # of the logits' spread


@pytest.fixture(scope="module")
def router_dir(tmp_path_factory):
    return tiny_router(tmp_path_factory.mktemp("prefix") / "model", seed=7, num_layers=3, kv_heads=2)


def queries(n: int) -> pd.DataFrame:
    return word_queries(n, seed=11)


@pytest.mark.parametrize("batch_size", [16, 5])
def test_cached_prefix_scores_what_the_full_pass_scores(router_dir, batch_size):
    router = LMRouter(router_dir, cfg=RouterConfig(batch_size=batch_size, quantize="none"))
    frame = queries(48)
    assert router.prefix is not None and len(router.prefix) >= 3  # the chat template's system turn at least
    assert all(router.prefix.fits(p) for p in router.prompts(frame))  # every prompt takes the cached path
    cached = router.score(frame)
    router._last, router.prefix = None, None
    plain = router.score(frame)
    spread = float(np.ptp(plain.merit))
    assert spread > 0.1  # the labels' logits differ: a real comparison
    assert np.max(np.abs(cached.merit - plain.merit)) <= TOLERANCE * spread
    for lam in LAMBDAS:
        assert cached.decide(lam).candidate_ids == plain.decide(lam).candidate_ids
    favourite = (plain.merit - plain.merit.mean(axis=0)).argmax(axis=1)
    assert len(set(favourite)) > 1  # queries differ in what they favour: agreement below means something
    assert np.array_equal((cached.merit - cached.merit.mean(axis=0)).argmax(axis=1), favourite)


def test_prompts_without_the_prefix_fall_back_in_the_same_batch(router_dir):
    router = LMRouter(router_dir, cfg=RouterConfig(quantize="none"))
    with_prefix = router.prompts(queries(6))
    others = [p[len(router.prefix):] for p in with_prefix[:3]]  # the bare query part: no shared prefix
    mixed = with_prefix + others + [list(router.prefix.tokens)]  # the prefix alone: nothing after it to read
    pad = router.tokenizer.pad_token_id
    assert [router.prefix.fits(p) for p in mixed] == [True] * 6 + [False] * 4
    got = label_logits(router.model, mixed, router.label_ids, pad, router.prefix)
    expected = np.stack([label_logits(router.model, [p], router.label_ids, pad)[0] for p in mixed])
    assert np.max(np.abs(got - expected)) <= TOLERANCE * float(np.ptp(expected))


def test_batches_leave_the_cached_prefix_untouched(router_dir):
    router = LMRouter(router_dir, cfg=RouterConfig(batch_size=4, quantize="none"))
    prompts, pad = router.prompts(queries(8)), router.tokenizer.pad_token_id
    with torch.inference_mode():
        before = [(k.clone(), v.clone()) for k, v in router.prefix.kv(router.model)]
    first = label_logits(router.model, prompts[:4], router.label_ids, pad, router.prefix)
    label_logits(router.model, prompts[4:], router.label_ids, pad, router.prefix)
    after = router.prefix.kv(router.model)
    assert all(torch.equal(k0, k1) and torch.equal(v0, v1) for (k0, v0), (k1, v1) in zip(before, after))
    assert all(k.shape[0] == 1 for k, _ in after)  # still one row: each batch expands its own view
    assert np.array_equal(first, label_logits(router.model, prompts[:4], router.label_ids, pad, router.prefix))


def test_common_prefix_and_its_edges():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == (1, 2)
    assert common_prefix([[1, 2], [3, 2]]) == ()
    assert common_prefix([[1, 2]]) == (1, 2)
    prefix = SharedPrefix([1, 2])
    assert prefix.fits([1, 2, 9]) and not prefix.fits([1, 2]) and not prefix.fits([2, 1, 9])
    with pytest.raises(ValueError, match="at least one token"):
        SharedPrefix([])
