"""The torch networks of the matrix-factorization and MLP baselines (imported when they fit, not when the family
table is read: a module whose name starts with ``_`` is not a family module)."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn


class MatrixFactorization(nn.Module):
    def __init__(self, dim_in: int, dim: int, n_candidates: int):
        super().__init__()
        self.candidate_vectors = nn.Embedding(n_candidates, dim)
        self.project = nn.Linear(dim_in, dim, bias=False)
        self.read_out = nn.Linear(dim, 1, bias=False)
        self.bias = nn.Parameter(torch.zeros(n_candidates))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [queries, candidates] for every candidate at once."""
        v = F.normalize(self.candidate_vectors.weight, p=2, dim=1)  # [c, dim]
        # w . (v_c * Wx) == (Wx) . (v_c * w): fold the read-out into the candidate vectors.
        return self.project(x) @ (v * self.read_out.weight).T + self.bias


class TwoHeadMLP(nn.Module):
    def __init__(self, dim_in: int, hidden_sizes: Sequence[int], n_candidates: int, dropout: float):
        super().__init__()
        layers: list[nn.Module] = []
        width = dim_in
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        self.trunk = nn.Sequential(*layers)
        self.correct_head = nn.Linear(width, n_candidates)
        self.energy_head = nn.Linear(width, n_candidates)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.correct_head(h), self.energy_head(h)
