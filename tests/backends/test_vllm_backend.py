"""The vLLM backend: a clear error where vLLM is absent (here), a real run where it is present."""

from __future__ import annotations

import importlib.util

import pytest

from jouleroute.backends import GenRequest
from jouleroute.backends.vllm_backend import VLLMBackend

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: the missing-package error cannot happen")
def test_missing_vllm_says_where_to_run_it(tiny_model_dir):
    with pytest.raises(ImportError, match="own environment.*backend.kind='openai'"):
        VLLMBackend(str(tiny_model_dir))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (it needs its own environment)")
def test_vllm_generates_greedily(tiny_model_dir):
    backend = VLLMBackend(str(tiny_model_dir), dtype="float32", enforce_eager=True)
    first = backend.generate([GenRequest(prompt="The quick brown", max_new_tokens=5)])
    again = backend.generate([GenRequest(prompt="The quick brown", max_new_tokens=5)])
    assert first == [r.__class__(**{**r.__dict__, "latency_s": first[0].latency_s}) for r in again]
    assert first[0].output_tokens == 5
