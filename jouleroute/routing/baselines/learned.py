"""Common frame of the learned baselines: embed, predict (p_correct, energy), decide.

A subclass only says how to fit on embedded training queries and how to predict
``p_correct`` and ``energy_j`` for new ones. Everything else is here: building
the training table, stripping the per-task scaffolding of few-shot prompts
(``jouleroute.routing.scaffold``), the embedding cache, measuring the router's own
cost, and the decision rule of ``jouleroute.routing.scores``.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.energy.base import Meter
from jouleroute.routing.base import Router, Scores
from jouleroute.routing.baselines.embeddings import Embedder
from jouleroute.routing.scaffold import Scaffold, learn_scaffolds, strip_queries
from jouleroute.routing.scores import DEFAULT_LAM, check_norm
from jouleroute.routing.baselines.simple import query_ids_of
from jouleroute.routing.baselines.train_table import TrainTable, build_train_table

log = logging.getLogger(__name__)


class LearnedRouter(Router):
    """Router trained on the train profile; decides ``argmax_c p(q, c) - lam * e~(q, c)``.

    With a ``meter``, ``score`` measures embedding plus prediction in one
    window, bypassing the embedding cache so the cost is the one a deployment would
    pay, and charges every query the window's mean per query. ``overhead_sample``
    caps how many routed queries (a seeded random sample) are measured: on a CPU,
    re-embedding a whole test split for each learned family costs minutes, and the
    per-query mean of a few hundred is as good. ``None`` measures them all.

    With ``strip_scaffold``, ``fit`` learns per task the text all training prompts
    share (a few-shot block, an instruction line) and both training and routed
    questions are embedded without it: an encoder that truncates long prompts would
    otherwise see one vector per task. Routed queries then need a ``task`` column.

    A family's own params (``baselines.<name>``) arrive as ``config``, an instance of the subclass's
    ``config_class`` (its defaults when ``None``); a subclass reads ``self.config`` and declares no
    constructor of its own.
    """

    config_class: type | None = None  # the typed class of the family's params sub-section, if it has one

    def __init__(
        self,
        candidates: Sequence[str],
        embedder: Embedder,
        config=None,
        *,
        lam: float = DEFAULT_LAM,
        energy_norm: str = "max",
        meter: Meter | None = None,
        seed: int = 0,
        overhead_sample: int | None = 256,
        strip_scaffold: bool = True,
    ):
        super().__init__(candidates)
        if config is not None and self.config_class is not None and not isinstance(config, self.config_class):
            raise TypeError(f"{self.name}: config must be a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config if config is not None or self.config_class is None else self.config_class()
        if overhead_sample is not None and overhead_sample <= 0:
            raise ValueError(f"overhead_sample must be positive or None, got {overhead_sample}")
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        check_norm(energy_norm)  # rejects an unknown name now, not at route time
        self.embedder = embedder
        self.lam = lam
        self.default_lam = lam
        self.energy_norm = energy_norm
        self.meter = meter
        self.seed = seed
        self.overhead_sample = overhead_sample
        self.strip_scaffold = strip_scaffold
        self.scaffolds: dict[str, Scaffold] = {}  # task -> scaffold, learned by fit
        self.energy_source: str | None = None  # of the training energies, set by fit

    def fit(
        self, profile: pd.DataFrame, queries: pd.DataFrame, energy_column: str = "energy_j", split: str = "train"
    ) -> "LearnedRouter":
        """Train on the ``split`` rows of ``profile``; questions come from ``queries``."""
        table = build_train_table(profile, queries, self.candidates, energy_column=energy_column, split=split)
        self.scaffolds = self._learn_scaffolds(table)
        x = self.embedder(self._strip(table.texts, table.tasks))
        self._fit(x, table)
        self.energy_source = table.energy_source
        log.info("%s fitted on %d queries x %d candidates", self.name, len(table.query_ids), len(self.candidates))
        return self

    @abstractmethod
    def _fit(self, x: np.ndarray, table: TrainTable) -> None:
        """Learn from query embeddings ``x`` [queries, dim] and the outcomes in ``table``."""

    @abstractmethod
    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(p_correct, energy_j)``, each [queries, candidates]."""

    def _learn_scaffolds(self, table: TrainTable) -> dict[str, Scaffold]:
        if not self.strip_scaffold:
            return {}
        if table.tasks is None:
            log.warning("%s: no 'task' column in the query table or profile; prompts are embedded whole", self.name)
            return {}
        by_task: dict[str, list[str]] = {}
        for text, task in zip(table.texts, table.tasks):
            by_task.setdefault(task, []).append(text)
        return learn_scaffolds(by_task)

    def _strip(self, texts: list[str], tasks: Sequence[str] | None) -> list[str]:
        """``texts`` without their task's scaffold; untouched when no task has one."""
        if not any(self.scaffolds.values()):
            return texts
        if tasks is None:
            raise ValueError(f"queries need a 'task' column: the {self.name} router strips per-task scaffolds")
        return strip_queries(texts, tasks, self.scaffolds)

    def _embed_and_predict(self, texts: list[str], use_cache: bool) -> tuple[np.ndarray, np.ndarray]:
        if self.energy_source is None:
            raise RuntimeError(f"{self.name} router is not fitted; call fit(profile, queries) first")
        return self._predict(self.embedder(texts, use_cache=use_cache))

    def score(self, queries: pd.DataFrame) -> Scores:
        """Predictions for a batch (merit = p_correct), to be decided at one or many λ (``Scores.decide``)."""
        ids = query_ids_of(queries)
        if "question" not in queries.columns:
            raise ValueError(f"queries need a 'question' column; got {list(queries.columns)}")
        texts = queries["question"].astype(str).tolist()
        tasks = queries["task"].astype(str).tolist() if "task" in queries.columns else None
        texts = self._strip(texts, tasks)  # string work, negligible beside embedding: not metered
        n = len(ids)
        if n == 0:
            raise ValueError("no queries to route")
        if self.meter is None:
            p, e = self._embed_and_predict(texts, use_cache=True)
            latency, energy, source = [0.0] * n, [0.0] * n, "none"
        else:
            size = n if self.overhead_sample is None else min(n, self.overhead_sample)
            sample = np.sort(np.random.default_rng(self.seed).choice(n, size=size, replace=False))
            self.embedder.warm_up()  # model loading is a one-off, not a per-query cost
            with self.meter.window() as box:
                p, e = self._embed_and_predict([texts[i] for i in sample], use_cache=False)
            if size < n:
                p, e = self._embed_and_predict(texts, use_cache=True)
            window = box[0]
            latency, energy, source = [window.time_s / size] * n, [window.energy_j / size] * n, window.source
        return Scores.from_energy(ids, self.candidates, np.clip(p, 0.0, 1.0), e, self.energy_norm,
                                  overhead_latency_s=latency, overhead_energy_j=energy, overhead_energy_source=source)
