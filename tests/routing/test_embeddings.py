"""Query embeddings: the hashing encoder, the on-disk cache, and the real all-MiniLM-L6-v2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import jouleroute
from jouleroute.routing.baselines.config import EmbeddingConfig
from jouleroute.routing.baselines.embeddings import HashingEmbedder, SentenceEmbedder, build_embedder, embed_queries
from tests.routing.helpers import CountingEmbedder

TEXTS = ["add two plus three", "add five plus seven", "who ruled the roman empire"]


def test_hashing_embedder_is_deterministic_unit_length_and_topical():
    vectors = HashingEmbedder(dim=64)(TEXTS)
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors, HashingEmbedder(dim=64)(TEXTS))
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_cache_encodes_each_text_once(tmp_path):
    first = CountingEmbedder(cache_dir=tmp_path)
    vectors = first(TEXTS)
    assert first.encoded == TEXTS
    again = CountingEmbedder(cache_dir=tmp_path)
    assert np.array_equal(again(TEXTS[::-1]), vectors[::-1])
    assert again.encoded == []
    again(TEXTS + ["a new question"])
    assert again.encoded == ["a new question"]
    assert again(TEXTS, use_cache=False).shape == (3, 256) and len(again.encoded) == 4
    assert [p.name for p in tmp_path.iterdir()] == ["hashing-256.npz"]


def test_cache_is_keyed_by_model(tmp_path):
    HashingEmbedder(dim=8, cache_dir=tmp_path)(TEXTS)
    wide = CountingEmbedder(dim=16, cache_dir=tmp_path)
    assert wide(TEXTS).shape == (3, 16) and wide.encoded == TEXTS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hashing-16.npz", "hashing-8.npz"]


def test_cache_refuses_the_package_directory():
    inside = Path(jouleroute.__file__).parent / "cache"
    with pytest.raises(ValueError, match="inside the jouleroute package"):
        HashingEmbedder(cache_dir=inside)(TEXTS)
    assert not inside.exists()


def test_no_texts_is_an_error():
    with pytest.raises(ValueError, match="no texts"):
        HashingEmbedder()([])


def test_config_picks_the_embedder(tmp_path):
    assert isinstance(build_embedder(EmbeddingConfig(model="hashing")), HashingEmbedder)
    with pytest.raises(FileNotFoundError, match="config.json missing"):
        build_embedder(EmbeddingConfig(model_dir=str(tmp_path)))


@pytest.mark.slow
def test_real_minilm_embeds_offline_and_similar_sentences_are_closer(tmp_path):
    sentences = [
        "What is the sum of two and three?",
        "Add 2 and 3 together. What do you get?",
        "The Roman emperor Augustus founded the principate.",
    ]
    vectors = embed_queries(sentences, cache_dir=tmp_path)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    model_key = SentenceEmbedder().model_key
    assert (tmp_path / f"{model_key}.npz").exists()
