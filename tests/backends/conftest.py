"""A tiny random Llama model and tokenizer, built locally once per session (no download)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from jouleroute.backends.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    from jouleroute.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_model_dir), device="cpu", torch_threads=1)
    yield backend
    backend.close()
