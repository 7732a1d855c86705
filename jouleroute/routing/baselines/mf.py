"""Matrix-factorization router in the style of RouteLLM's ``mf``.

Each candidate c has a learned vector v_c; the query embedding x_q is projected
by a learned W into the same space. As in RouteLLM, the candidate vector is
L2-normalized and combined with the projection elementwise before a linear read-out:

    logit(q, c) = w . (v_c / |v_c|  *  W x_q) + b_c
    p(q, c)     = sigmoid(logit(q, c))

RouteLLM trains on pairwise preferences between a strong and a weak model; here
the label is each candidate's own correctness, trained pointwise with BCE on
every observed (query, candidate) pair, so a per-candidate bias b_c carries each
candidate's base accuracy (pairwise training cancels it). The model predicts no
energy: E(q, c) is candidate c's mean energy on the train split.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from jouleroute.routing.baselines.learned import LearnedRouter
from jouleroute.routing.baselines.train_table import TrainTable
from jouleroute.routing.families import register_family
from jouleroute.strict import StrictModel


class MFConfig(StrictModel):
    dim: int = Field(default=64, gt=0)  # size of the candidate and projected query vectors
    epochs: int = Field(default=30, gt=0)
    lr: float = Field(default=3e-3, gt=0.0)
    weight_decay: float = Field(default=1e-5, ge=0.0)
    batch_size: int = Field(default=256, gt=0)


class MFRouter(LearnedRouter):
    name = "mf"

    config_class = MFConfig
    loss_history: list[float]  # per epoch, set by fit

    def _fit(self, x: np.ndarray, table: TrainTable) -> None:
        import torch

        from jouleroute.routing.baselines._nets import MatrixFactorization
        from jouleroute.routing.baselines._torch_fit import as_targets, fit_seeded, masked_bce

        correct, observed = as_targets(table.correct)
        inputs = torch.tensor(x, dtype=torch.float32)
        self.mean_energy_j = table.candidate_mean_energy_j()

        def batch_loss(rows: torch.Tensor) -> torch.Tensor:
            return masked_bce(self.net(inputs[rows]), correct[rows], observed[rows])

        fit_seeded(self, lambda: MatrixFactorization(x.shape[1], self.config.dim, len(self.candidates)), len(x),
                   batch_loss)

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        from jouleroute.routing.baselines._torch_fit import single_threaded

        with torch.no_grad(), single_threaded():
            p = torch.sigmoid(self.net(torch.tensor(x, dtype=torch.float32))).numpy().astype(np.float64)
        return p, np.tile(self.mean_energy_j, (len(x), 1))


register_family("mf", MFRouter, rank=5)
