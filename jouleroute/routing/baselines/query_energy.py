"""Per-query energy ê_c(x): each candidate's joules predicted from the query, instead of its task mean.

A candidate's energy on a query is mostly its output length, and the query says much about that (a
competition problem draws a longer answer than a one-line fact). Per candidate ``c`` the model is, in
log joules,

    log ê_c(x) = m_c(task) + w_c · z(x)          ê_c(x) = exp(log ê_c(x)) · s_c

with ``m_c(task)`` the candidate's train mean of log joules on the query's task (its overall mean for an
unseen task), ``z(x)`` the query's sentence embedding (the baselines' encoder, scaffold stripped) and
``w_c`` a ridge regression of the residuals on it. The ridge weight is chosen per candidate by k-fold
cross-validation on train from ``alphas``; a very large weight gives ``w_c = 0``, the task's geometric
mean, so the model can only move away from the task mean where train says the query helps. ``s_c`` is
Duan's smearing factor (the mean of exp(out-of-fold residual)), which turns the log-scale prediction
into a mean in joules. Nothing reads a task's or a model's name: tasks are groups, candidates columns.

``PerQueryEnergy`` wraps any router: its scores keep the router's merit and take ê as their energy,
through ``Scores.with_energy`` (the one routing contract). The evaluate stage adopts it per family only
where the val utility says so (evaluation/query_energy.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.routing.base import Router, Scores
from jouleroute.routing.baselines.embeddings import Embedder
from jouleroute.routing.baselines.train_table import build_train_table
from jouleroute.routing.scaffold import learn_scaffolds, strip_queries

_FLOOR_J = 1e-9
DEFAULT_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e9)  # 1e9: the task mean itself


def _ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Weights of min |y − x w|² + α |w|² (x, y centred by the caller)."""
    d = x.shape[1]
    return np.linalg.solve(x.T @ x + alpha * np.eye(d), x.T @ y)


def _ridge_path(x: np.ndarray, y: np.ndarray, x_new: np.ndarray):
    """alpha -> ridge predictions at ``x_new``, from one eigen-decomposition of the smaller of xᵀx and xxᵀ."""
    if x.shape[0] >= x.shape[1]:
        evals, v = np.linalg.eigh(x.T @ x)
        left, right = x_new @ v, v.T @ (x.T @ y)
    else:
        evals, u = np.linalg.eigh(x @ x.T)
        left, right = x_new @ x.T @ u, u.T @ y
    return lambda alpha: left @ (right / (np.maximum(evals, 0.0) + alpha))


class QueryEnergyModel:
    """ê_c(x) for every candidate of a pool, fitted on the train split (module docstring)."""

    def __init__(self, candidates: Sequence[str], embedder: Embedder, alphas: Sequence[float] = DEFAULT_ALPHAS,
                 folds: int = 5, seed: int = 0, strip_scaffold: bool = True):
        self.candidates = list(candidates)
        self.embedder = embedder
        self.alphas = tuple(float(a) for a in alphas)
        self.folds = folds
        self.seed = seed
        self.strip_scaffold = strip_scaffold
        self.fitted = False

    def _texts(self, texts: list[str], tasks: list[str]) -> list[str]:
        return strip_queries(texts, tasks, self.scaffolds) if any(self.scaffolds.values()) else texts

    def fit(self, profile: pd.DataFrame, queries: pd.DataFrame, energy_column: str = "energy_j",
            split: str = "train") -> "QueryEnergyModel":
        table = build_train_table(profile, queries, self.candidates, energy_column=energy_column, split=split)
        tasks = list(table.tasks or [""] * len(table.query_ids))
        by_task: dict[str, list[str]] = {}
        for text, task in zip(table.texts, tasks):
            by_task.setdefault(task, []).append(text)
        self.scaffolds = learn_scaffolds(by_task) if self.strip_scaffold else {}
        x = np.asarray(self.embedder(self._texts(table.texts, tasks)), dtype=np.float64)
        self.x_mean = x.mean(axis=0)
        x = x - self.x_mean
        logs = np.log(np.maximum(table.energy_j, _FLOOR_J))
        task_arr = np.asarray(tasks, dtype=object)
        self.task_mean: list[dict[str, float]] = []
        self.overall: list[float] = []
        self.weights, self.smear, self.alpha = [], [], []
        order = np.random.default_rng(self.seed).permutation(len(tasks))
        for j in range(len(self.candidates)):
            seen = ~np.isnan(logs[:, j])
            means = {t: float(np.mean(logs[seen & (task_arr == t), j])) for t in set(task_arr[seen])}
            overall = float(np.mean(logs[seen, j]))
            base = np.array([means.get(t, overall) for t in task_arr])
            resid = np.where(seen, logs[:, j] - base, 0.0)
            alpha, oof = self._choose_alpha(x, resid, seen, order)
            self.task_mean.append(means)
            self.overall.append(overall)
            self.alpha.append(alpha)
            self.weights.append(_ridge(x[seen], resid[seen], alpha))
            self.smear.append(float(np.mean(np.exp(oof[seen]))))
        self.fitted = True
        return self

    def _choose_alpha(self, x: np.ndarray, resid: np.ndarray, seen: np.ndarray,
                      order: np.ndarray) -> tuple[float, np.ndarray]:
        """The ridge weight with the lowest k-fold squared error in log joules, and its out-of-fold residuals.
        One eigen-decomposition per fold (of the smaller Gram matrix) serves every weight."""
        rows = order[seen[order]]
        k = max(2, min(self.folds, len(rows)))
        fold_of = np.full(len(resid), -1)
        fold_of[rows] = np.arange(len(rows)) % k
        oof = {alpha: np.zeros_like(resid) for alpha in self.alphas}
        for f in range(k):
            held, fit = seen & (fold_of == f), seen & (fold_of != f)
            if not (held.any() and fit.any()):
                continue
            paths = _ridge_path(x[fit], resid[fit], x[held])
            for alpha in self.alphas:
                oof[alpha][held] = resid[held] - paths(alpha)
        errors = {alpha: float(np.mean(oof[alpha][seen] ** 2)) for alpha in self.alphas}
        best = min(self.alphas, key=lambda a: (round(errors[a], 12), -a))  # ties: the stronger shrinkage
        return best, oof[best]

    def predict(self, queries: pd.DataFrame) -> np.ndarray:
        """[queries, candidates] predicted joules."""
        if not self.fitted:
            raise RuntimeError("QueryEnergyModel: fit() first")
        tasks = queries["task"].astype(str).tolist() if "task" in queries.columns else [""] * len(queries)
        x = np.asarray(self.embedder(self._texts(queries["question"].astype(str).tolist(), tasks)),
                       dtype=np.float64) - self.x_mean
        out = np.empty((len(queries), len(self.candidates)))
        for j in range(len(self.candidates)):
            base = np.array([self.task_mean[j].get(t, self.overall[j]) for t in tasks])
            out[:, j] = np.exp(base + x @ self.weights[j]) * self.smear[j]
        return out


class PerQueryEnergy(Router):
    """``inner``'s scores with ê_c(x) as their energy; every other attribute is ``inner``'s."""

    def __init__(self, inner: Router, model: QueryEnergyModel, energy_norm: str):
        self.__dict__["inner"] = inner
        self.__dict__["model"] = model
        self.__dict__["energy_norm_used"] = energy_norm
        self.__dict__["candidates"] = list(inner.candidates)

    @property
    def name(self) -> str:  # Router's class attributes would shadow the inner router's
        return self.__dict__["inner"].name

    @property
    def default_lam(self) -> float:
        return self.__dict__["inner"].default_lam

    def __getattr__(self, name: str):
        return getattr(self.__dict__["inner"], name)

    def __setattr__(self, name: str, value) -> None:  # e.g. the caller turning the meter off: the inner's
        setattr(self.__dict__["inner"], name, value)

    def score(self, queries: pd.DataFrame, **kw) -> Scores:
        scores = self.inner.score(queries, **kw)
        predicted = pd.DataFrame(self.model.predict(queries), columns=self.model.candidates)
        return scores.with_energy(predicted[scores.candidates].to_numpy(), self.energy_norm_used)
