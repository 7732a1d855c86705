"""k-nearest-neighbour router: a query inherits the outcomes of its closest training queries.

For a query q with neighbours N_k(q) (cosine distance between embeddings),

    p(q, c) = mean_{n in N_k(q)} correct(n, c)
    E(q, c) = mean_{n in N_k(q)} energy_j(n, c)

over the neighbours where c was run; a candidate run on none of them falls back
to its mean over the whole training set.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from jouleroute.routing.baselines.learned import LearnedRouter
from jouleroute.routing.baselines.train_table import TrainTable
from jouleroute.routing.families import register_family
from jouleroute.strict import StrictModel


def _neighbour_mean(values: np.ndarray, neighbours: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Mean of ``values`` [train, c] over each row of ``neighbours`` [n, k], ignoring NaN."""
    picked = values[neighbours]  # [n, k, c]
    seen = ~np.isnan(picked)
    count = seen.sum(axis=1)
    total = np.where(seen, picked, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), fallback[None, :])


class KNNConfig(StrictModel):
    k: int = Field(default=20, gt=0)  # neighbours; clipped to the number of training queries


class KNNRouter(LearnedRouter):
    name = "knn"

    config_class = KNNConfig

    def _fit(self, x: np.ndarray, table: TrainTable) -> None:
        from sklearn.neighbors import NearestNeighbors  # here, not at import: reading the family table stays cheap

        self.k_used = min(self.config.k, len(x))
        self.index = NearestNeighbors(n_neighbors=self.k_used, metric="cosine", algorithm="brute").fit(x)
        self.correct = table.correct
        self.energy_j = table.energy_j
        self.mean_correct = np.nanmean(table.correct, axis=0)
        self.mean_energy_j = table.candidate_mean_energy_j()

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, neighbours = self.index.kneighbors(x)
        p = _neighbour_mean(self.correct, neighbours, self.mean_correct)
        e = _neighbour_mean(self.energy_j, neighbours, self.mean_energy_j)
        return p, e


register_family("knn", KNNRouter, rank=3)
