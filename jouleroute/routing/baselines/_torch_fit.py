"""Small, seeded torch training loop shared by the MLP and matrix-factorization baselines."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run torch on one thread inside the block.

    These models are a few small matrices: spreading each product over threads costs
    more than it saves, and on a busy 2-core machine spin-waiting threads made MF
    training 7x slower (38 s against 5 s measured). The caller's setting is restored.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def masked_bce(logits: torch.Tensor, correct: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the observed (query, candidate) pairs only."""
    loss = F.binary_cross_entropy_with_logits(logits, correct, weight=observed, reduction="sum")
    return loss / observed.sum().clamp(min=1.0)


def as_targets(matrix: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix with NaN for missing pairs -> (values with NaN set to 0, 0/1 mask)."""
    observed = ~np.isnan(matrix)
    values = np.where(observed, matrix, 0.0)
    return torch.tensor(values, dtype=torch.float32), torch.tensor(observed, dtype=torch.float32)


TRAINING_KEYS = ("epochs", "lr", "weight_decay", "batch_size")


def training_args(config) -> dict:
    """The ``train_minibatch`` arguments of a family's params sub-section (its epochs, lr, weight decay and
    batch size)."""
    return {key: getattr(config, key) for key in TRAINING_KEYS}


def fit_seeded(router, build: Callable[[], torch.nn.Module], n_rows: int,
               batch_loss: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Build ``router.net`` and train it on ``n_rows`` rows with its params' training keys, seeded by
    ``router.seed`` (weights, dropout and batch order) on one thread; sets ``router.loss_history``."""
    from jouleroute.provenance import seeded

    with seeded(router.seed), single_threaded():
        router.net = build()
        router.loss_history = train_minibatch(router.net, n_rows, batch_loss, seed=router.seed,
                                              **training_args(router.config))


def train_minibatch(
    module: torch.nn.Module,
    n_rows: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    *,
    epochs: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    seed: int,
) -> list[float]:
    """AdamW over shuffled row batches; ``batch_loss(row_index)`` returns the batch's loss.

    Returns the mean loss of each epoch. Call inside ``provenance.seeded`` so dropout is reproducible.
    """
    order_rng = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay)
    module.train()
    history = []
    for _ in range(epochs):
        order = torch.randperm(n_rows, generator=order_rng)
        total = 0.0
        for start in range(0, n_rows, batch_size):
            rows = order[start : start + batch_size]
            loss = batch_loss(rows)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(rows)
        history.append(total / n_rows)
    module.eval()
    return history
