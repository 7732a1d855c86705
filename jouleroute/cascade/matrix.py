"""The profile of one split as a cascade reads it: the outcome matrices plus each candidate's answer.

A cascade needs, per (query, candidate), what a router's outcome needs (correct, energy, latency and the energy's
source: the evaluation's ``ProfileMatrix``, of which this keeps the same fields and energy view) plus the answer
the candidate gave and its length in output tokens. The answers are compared once, into agreement bits
(``agreement.agreement_bits``), so a chain search tests any pair of candidates by indexing.

Which answer: ``extracted_answer`` where the profile has one (the tournament's grader extraction, a public pool's
recorded final answer); where it is missing and the task is multiple choice, the option letter read from
``output_text`` (RouterBench records responses, not answers). Nothing else is read from the text, so a pool
without answers gets no agreement; ``answers_missing`` says so in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import pandas as pd

from jouleroute.benchmarks.extract import extract_letter
from jouleroute.cascade.agreement import agreement_bits, agreement_kind, has_answer


class OutcomeMatrix(Protocol):
    """What the cascade reads of ``evaluation.outcomes.ProfileMatrix`` (same names, same [Q, C] layout)."""

    query_ids: list[str]
    tasks: np.ndarray
    candidates: list[str]
    correct: np.ndarray
    energy_j: np.ndarray
    latency_s: np.ndarray
    source: np.ndarray


@dataclass
class CascadeMatrix:
    """One split's outcomes, answers' agreement and output lengths, aligned [queries, candidates]."""

    query_ids: list[str]
    tasks: np.ndarray  # (Q,)
    candidates: list[str]
    correct: np.ndarray  # (Q, C) correctness in [0, 1]
    energy_j: np.ndarray  # (Q, C) the energy view the ProfileMatrix was built with
    latency_s: np.ndarray  # (Q, C)
    source: np.ndarray  # (Q, C) energy_source of each cell
    output_tokens: np.ndarray  # (Q, C)
    agree: np.ndarray  # (Q, C, C) bool; diagonal: the candidate gave an answer that can agree

    @property
    def answered(self) -> np.ndarray:
        """(Q, C) bool: the candidate's answer was extracted (and is comparable on its task)."""
        return np.diagonal(self.agree, axis1=1, axis2=2)

    def column(self, candidate: str) -> int:
        try:
            return self.candidates.index(candidate)
        except ValueError:
            raise KeyError(f"candidate {candidate!r} is not in the profile; candidates: {self.candidates}") from None

    def take(self, rows: Sequence[int] | np.ndarray) -> "CascadeMatrix":
        """The same matrix restricted to (or resampled at) query positions ``rows``."""
        rows = np.asarray(rows, dtype=int)
        return CascadeMatrix([self.query_ids[i] for i in rows], self.tasks[rows], list(self.candidates),
                             self.correct[rows], self.energy_j[rows], self.latency_s[rows], self.source[rows],
                             self.output_tokens[rows], self.agree[rows])


def read_answer(task: str, extracted: object, output_text: object) -> str | None:
    """The answer compared for one row (module doc): the extracted answer, else a multiple-choice option read
    from the output text, else none."""
    if isinstance(extracted, str) and extracted.strip():
        return extracted
    if agreement_kind(task) == "choice" and isinstance(output_text, str):
        return extract_letter(output_text.strip())
    return None


def _aligned(profile: pd.DataFrame, m: OutcomeMatrix, column: str) -> np.ndarray:
    """[Q, C] values of ``column`` in the matrix's order; None where the profile lacks the column or the value."""
    index = pd.MultiIndex.from_product([m.query_ids, m.candidates], names=["query_id", "candidate_id"])
    if column not in profile.columns:
        return np.full((len(m.query_ids), len(m.candidates)), None, dtype=object)
    rows = profile[profile["query_id"].isin(set(m.query_ids)) & profile["candidate_id"].isin(set(m.candidates))]
    values = rows.set_index(["query_id", "candidate_id"])[column].reindex(index)
    return values.to_numpy(dtype=object).reshape(len(m.query_ids), len(m.candidates))


def cascade_matrix(profile: pd.DataFrame, m: OutcomeMatrix) -> CascadeMatrix:
    """Add each candidate's answer agreement and output length (from ``profile``'s rows) to an outcome matrix."""
    extracted, text = _aligned(profile, m, "extracted_answer"), _aligned(profile, m, "output_text")
    tokens = _aligned(profile, m, "output_tokens")
    if pd.isna(tokens.astype(float)).any():
        q, c = np.argwhere(pd.isna(tokens.astype(float)))[0]
        raise ValueError(f"profile: no output_tokens for (query_id={m.query_ids[q]!r}, "
                         f"candidate_id={m.candidates[c]!r}); the cascade's length check needs it")
    answers = np.array([[read_answer(task, e, t) for e, t in zip(er, tr)]
                        for task, er, tr in zip(m.tasks, extracted, text)], dtype=object).reshape(extracted.shape)
    return CascadeMatrix(list(m.query_ids), np.asarray(m.tasks, dtype=object), list(m.candidates),
                         np.asarray(m.correct, dtype=float), np.asarray(m.energy_j, dtype=float),
                         np.asarray(m.latency_s, dtype=float), np.asarray(m.source, dtype=object),
                         tokens.astype(float), agreement_bits(list(m.tasks), answers))


def answers_missing(profile: pd.DataFrame) -> str | None:
    """One line saying why the cascade is skipped on ``profile`` (no answer on any task it can compare), or
    ``None`` when some task's answers can agree."""
    comparable = [t for t in sorted(profile["task"].unique()) if agreement_kind(t) is not None]
    if not comparable:
        return (f"cascade skipped: no task of the profile ({', '.join(sorted(profile['task'].unique()))}) has a "
                "comparable answer (code or free text)")
    rows = profile[profile["task"].isin(comparable)]
    extracted = rows["extracted_answer"] if "extracted_answer" in rows else pd.Series(None, index=rows.index)
    text = rows["output_text"] if "output_text" in rows else pd.Series(None, index=rows.index)
    for task, e, t in zip(rows["task"], extracted, text):
        answer = read_answer(task, e, t)
        if answer is not None and has_answer(task, answer):
            return None
    return (f"cascade skipped: the profile carries no answers (extracted_answer empty, no option in output_text) "
            f"for its tasks {comparable}")
