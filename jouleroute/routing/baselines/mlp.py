"""MLP router: one network predicts every candidate's correctness and energy from the query embedding.

A shared trunk (Linear-ReLU-Dropout per hidden size) feeds two heads of one
output per candidate:

    p(q, c) = sigmoid(h_c(x_q))                       trained with BCE on correct(q, c)
    E(q, c) = exp(mu_c + sigma_c * g_c(x_q))          trained with MSE on standardized log energy

mu_c, sigma_c are the mean and spread of candidate c's log energy on the train
split. Unobserved (query, candidate) pairs are masked out of both losses.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator

from jouleroute.routing.baselines.learned import LearnedRouter
from jouleroute.routing.baselines.train_table import TrainTable
from jouleroute.routing.families import register_family
from jouleroute.strict import StrictModel

# Energies at or below zero (possible for idle-subtracted net energy) cannot be logged.
_LOG_FLOOR_J = 1e-9


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


class MLPRouter(LearnedRouter):
    name = "mlp"

    config_class = MLPConfig
    loss_history: list[float]  # per epoch, set by fit

    def _fit(self, x: np.ndarray, table: TrainTable) -> None:
        import torch

        from jouleroute.routing.baselines._nets import TwoHeadMLP
        from jouleroute.routing.baselines._torch_fit import as_targets, fit_seeded, masked_bce

        log_e = np.log(np.maximum(table.energy_j, _LOG_FLOOR_J))  # NaN stays NaN
        self.log_mu = np.nanmean(log_e, axis=0)
        spread = np.nanstd(log_e, axis=0)
        self.log_sigma = np.where(spread > 0, spread, 1.0)
        correct, observed = as_targets(table.correct)
        energy_target, _ = as_targets((log_e - self.log_mu) / self.log_sigma)
        inputs = torch.tensor(x, dtype=torch.float32)

        def batch_loss(rows: torch.Tensor) -> torch.Tensor:
            logits, log_energy = self.net(inputs[rows])
            mask = observed[rows]
            squared = (log_energy - energy_target[rows]) ** 2 * mask
            return masked_bce(logits, correct[rows], mask) + squared.sum() / mask.sum().clamp(min=1.0)

        fit_seeded(self, lambda: TwoHeadMLP(x.shape[1], self.config.hidden_sizes, len(self.candidates),
                                            self.config.dropout), len(x), batch_loss)

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        from jouleroute.routing.baselines._torch_fit import single_threaded

        with torch.no_grad(), single_threaded():
            logits, log_energy = self.net(torch.tensor(x, dtype=torch.float32))
        p = torch.sigmoid(logits).numpy().astype(np.float64)
        e = np.exp(self.log_mu + self.log_sigma * log_energy.numpy().astype(np.float64))
        return p, e


register_family("mlp", MLPRouter, rank=4)
