"""The cheap LM router: early exit keeps the first layers exactly; int8 and bf16 agree with fp32 within stated tolerances.

Tolerance (measured on this test's fixed sample: seed 5, 64 queries, a random tiny model
initialised like real ones, std 0.02): int8 dynamic quantization moved the label logits by at
most 5.8% of their spread (p95 4.3%) and changed no decision at λ = 0, 0.5 or 2; the test allows
10% of the spread and 95% agreement. (With std 0.1, a scale no trained model has, the error
grows to 19% and agreement at λ = 0 falls to 77%: quantization error scales with the weights.)
bf16 (weights and activations; measured on the same sample): the label logits moved by at most 1.5%
of their spread (p95 0.9%), no decision changed at λ = 0, 0.5 or 2; the test allows 5% and 95%.
On the replay study's trained routers the agreement is measured on val by
experiments/router_levers.py and stated in docs/router-training.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.lm.spec import RouterSpec
from jouleroute.training.trunk import keep_first_layers
from tests.routing.helpers import ENERGY, POOL, tiny_router, word_queries



@pytest.fixture(scope="module")
def router_dir(tmp_path_factory):
    return tiny_router(tmp_path_factory.mktemp("fast") / "model", seed=5, num_layers=4)


def queries(n: int) -> pd.DataFrame:
    return word_queries(n, seed=5)


def test_int8_agrees_with_fp32_within_the_stated_tolerance(router_dir):
    frame = queries(64)
    full = LMRouter(router_dir, cfg=RouterConfig(quantize="none")).score(frame)
    fast_router = LMRouter(router_dir, cfg=RouterConfig(quantize="int8"))
    assert fast_router.quantized
    fast = fast_router.score(frame)
    spread = float(np.ptp(full.merit))
    assert spread > 0.1  # the logits differ between labels: a real comparison
    assert np.max(np.abs(fast.merit - full.merit)) <= 0.10 * spread
    for lam in (0.0, 0.5, 2.0):
        agree = np.mean(np.array(fast.decide(lam).candidate_ids) == np.array(full.decide(lam).candidate_ids))
        assert agree >= 0.95, (lam, agree)


def test_bf16_agrees_with_fp32_within_the_stated_tolerance(router_dir):
    frame = queries(64)
    full = LMRouter(router_dir, cfg=RouterConfig(precision="fp32")).score(frame)
    low_router = LMRouter(router_dir, cfg=RouterConfig(precision="bf16"))
    assert low_router.model.dtype == torch.bfloat16
    low = low_router.score(frame)
    spread = float(np.ptp(full.merit))
    assert spread > 0.1
    assert 0 < np.max(np.abs(low.merit - full.merit)) <= 0.05 * spread  # moved (really bf16), but little
    for lam in (0.0, 0.5, 2.0):
        agree = np.mean(np.array(low.decide(lam).candidate_ids) == np.array(full.decide(lam).candidate_ids))
        assert agree >= 0.95, (lam, agree)


@pytest.mark.parametrize("native", [True, False])
def test_native_precision_is_bf16_only_where_the_cpu_multiplies_it(monkeypatch, native):
    # The CPU's bf16 units are stubbed at their boundary (torch's CPU feature probe), so both answers are checked
    # on any machine; auto stays fp32 on every CPU, so evaluation gives the same figures everywhere.
    from jouleroute import torch_env

    monkeypatch.setattr(torch_env, "native_bf16_cpu", lambda: native)
    assert torch_env.inference_dtype("native", "cpu") == (torch.bfloat16 if native else torch.float32)
    assert torch_env.inference_dtype("auto", "cpu") == torch.float32
    assert torch_env.inference_dtype("native", "cuda") == torch.bfloat16
    assert torch_env.inference_dtype("fp32", "cuda") == torch.float32


def test_auto_quantizes_on_cpu_only_when_asked_or_auto(router_dir):
    assert LMRouter(router_dir, cfg=RouterConfig(quantize="auto", device="cpu")).quantized
    assert not LMRouter(router_dir, cfg=RouterConfig(quantize="none")).quantized
    assert not LMRouter(router_dir).quantized  # the default keeps fp32 until measured on trained routers


def test_early_exit_equals_the_full_model_read_at_that_layer(router_dir, tmp_path):
    """A checkpoint cut to its first n layers scores exactly what the full model's layer-n residual
    stream gives through the final norm and the label rows of the head."""
    full = AutoModelForCausalLM.from_pretrained(str(router_dir)).eval()
    cut = keep_first_layers(AutoModelForCausalLM.from_pretrained(str(router_dir)), 2)
    cut.save_pretrained(str(tmp_path))
    RouterSpec.load(router_dir).save(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if (router_dir / name).exists():
            (tmp_path / name).write_bytes((router_dir / name).read_bytes())
    router = LMRouter(tmp_path, cfg=RouterConfig(quantize="none"))
    assert router.model.config.num_hidden_layers == 2 and len(router.model.base_model.layers) == 2
    frame = queries(5)
    scored = router.score(frame).merit
    for row, prompt in zip(scored, router.prompts(frame)):
        with torch.inference_mode():
            hidden = full(input_ids=torch.tensor([prompt]), output_hidden_states=True).hidden_states[2][0, -1]
            expected = full.model.norm(hidden) @ full.lm_head.weight[router.label_ids].T
        assert np.allclose(row, expected.numpy(), atol=1e-4)
    with pytest.raises(ValueError, match=">= 1"):
        keep_first_layers(AutoModelForCausalLM.from_pretrained(str(router_dir)), 0)
