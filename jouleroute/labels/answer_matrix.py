"""Each query's candidates' answers, and which of them agree: what a label policy reads.

A task the project knows (the benchmark registry, or ``cascade.agreement.EXTRA_TASK_KINDS``) compares answers by
its grader's equivalence (``cascade.agreement``: GSM8K numbers as decimals, MATH by math-verify, option letters),
reading each row's answer as the cascade does (``cascade.matrix.read_answer``). A known task with no comparable
answer (code, free text) compares none. Any other task, such as a user's own prompts, compares the answers a
task-free extractor reads from each output (the caller passes it: ``benchmarks.task_free.extract_answer``), equal when
both exist and their normal forms are equal; without one its answers compare none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from jouleroute.benchmarks.registry import TASKS
from jouleroute.cascade.agreement import EXTRA_TASK_KINDS, agreement_bits, agreement_kind
from jouleroute.cascade.matrix import read_answer

TaskFreeExtractor = Callable[[str | None], str | None]  # an output's normalised answer, None when it states none


@dataclass
class AnswerMatrix:
    """A profile's answers as [queries, candidates], aligned."""

    query_ids: list[str]
    tasks: list[str]
    candidates: list[str]
    present: np.ndarray  # (Q, K) bool: the profile has a row for the pair
    agree: np.ndarray  # (Q, K, K) bool: the two answers agree; diagonal: the candidate gave a comparable answer
    comparable: np.ndarray  # (Q,) bool: the query's task compares answers at all

    def cell(self, query_id: str, candidate_id: str) -> tuple[int, int]:
        return self._rows[query_id], self._columns[candidate_id]

    def __post_init__(self) -> None:
        self._rows = {q: i for i, q in enumerate(self.query_ids)}
        self._columns = {c: j for j, c in enumerate(self.candidates)}


def task_is_known(task: str) -> bool:
    """Whether ``task``'s answers are compared by a grader's equivalence (else by the task-free extractor)."""
    return task in TASKS or task in EXTRA_TASK_KINDS


def answer_matrix(profile: pd.DataFrame, task_free: TaskFreeExtractor | None = None) -> AnswerMatrix:
    """The agreement of every query's answers in ``profile`` (rows: query_id, candidate_id, task, and
    extracted_answer and/or output_text)."""
    query_ids = list(dict.fromkeys(profile["query_id"]))
    candidates = sorted(profile["candidate_id"].unique())
    tasks = profile.drop_duplicates("query_id").set_index("query_id")["task"].reindex(query_ids).tolist()
    index = pd.MultiIndex.from_product([query_ids, candidates], names=["query_id", "candidate_id"])
    pairs = pd.MultiIndex.from_frame(profile[["query_id", "candidate_id"]])
    if pairs.has_duplicates:
        query_id, candidate_id = pairs[pairs.duplicated()][0]
        raise ValueError(f"profile: two rows for (query_id={query_id!r}, candidate_id={candidate_id!r})")
    present = index.isin(pairs).reshape(len(query_ids), len(candidates))
    extracted, texts = (_cells(profile, index, c) for c in ("extracted_answer", "output_text"))
    agree = np.zeros((len(query_ids), len(candidates), len(candidates)), dtype=bool)
    known = np.array([task_is_known(t) for t in tasks], dtype=bool)
    comparable = np.array([agreement_kind(t) is not None if k else task_free is not None
                           for t, k in zip(tasks, known)], dtype=bool)
    graded = np.flatnonzero(known & comparable)
    if graded.size:
        answers = np.array([[read_answer(tasks[q], e, t) for e, t in zip(extracted[q], texts[q])] for q in graded],
                           dtype=object).reshape(graded.size, len(candidates))
        agree[graded] = agreement_bits([tasks[q] for q in graded], answers)
    for q in np.flatnonzero(~known & comparable):
        keys = [task_free(_text(t) or _text(e)) for e, t in zip(extracted[q], texts[q])]
        agree[q] = [[a is not None and a == b for b in keys] for a in keys]
    agree &= present[:, :, None] & present[:, None, :]
    return AnswerMatrix(query_ids, tasks, candidates, present, agree, comparable)


def _cells(profile: pd.DataFrame, index: pd.MultiIndex, column: str) -> np.ndarray:
    """[Q, K] values of ``column`` in ``index``'s order (None where the profile lacks the column, row or value)."""
    shape = (len(index.unique(0)), len(index.unique(1)))
    if column not in profile.columns:
        return np.full(shape, None, dtype=object)
    cells = profile.set_index(["query_id", "candidate_id"])[column].reindex(index).astype(object).to_numpy()
    return np.where(pd.isna(cells), None, cells).reshape(shape)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
