"""Shared builders of the routing tests: a tiny random LM router on a four-candidate pool, its queries, and
an embedder that records what it really encodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.backends.tiny import build_tiny_llama
from jouleroute.routing.baselines.embeddings import HashingEmbedder
from jouleroute.routing.lm.spec import RouterSpec

POOL = ["a", "b", "c", "d"]
ENERGY = {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}
LAMBDAS = [0.0, 0.5, 2.0]
WORDS = "what is plus the of a number sum two three more than less".split()


def tiny_router(folder: Path, seed: int, num_layers: int, **shape) -> Path:
    """A tiny random Llama saved as an LM router over ``POOL`` (modelled energies ``ENERGY``)."""
    build_tiny_llama(folder, hidden_size=64, num_layers=num_layers, num_heads=4, seed=seed, initializer_range=0.02,
                     corpus=[f"what is {i} plus {i + 1}" for i in range(20)], **shape)
    RouterSpec(candidates=POOL, labels=["A", "B", "C", "D"], energy_source="modelled", energy_norm="max",
               label_policy="utility", lambdas=LAMBDAS, utility_scale=10.0, max_query_tokens=48,
               task_energy_j={"t": ENERGY}, pool_energy_j=ENERGY).save(folder)
    return folder


def word_queries(n: int, seed: int) -> pd.DataFrame:
    """``n`` queries of task ``t`` of 3 to 29 words drawn from a small vocabulary (seeded)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "task": ["t"] * n,
                         "question": [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 30)))) for _ in range(n)]})


class CountingEmbedder(HashingEmbedder):
    """The hashing encoder, recording the texts it really encodes (cache misses)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded += texts
        return super().encode(texts)
