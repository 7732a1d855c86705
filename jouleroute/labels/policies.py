"""Label policies: each candidate's answer marked correct or not without reading a gold answer.

- ``reference``: correct iff the answer agrees with the reference candidate's. The reference's own answers are
  then correct by definition (the summary says so); a query where the reference gave no comparable answer gets
  no label.
- ``vote``: correct iff the answer agrees with the pool's plurality answer (the answer most candidates agree
  with). A query where two answers that disagree have the most support (a tie), or no candidate answered, gets
  no label.
- ``gold``: the grader's labels, as the profile carries them.

Under ``reference`` and ``vote`` a candidate that gave no comparable answer where the query is labelled is wrong,
as an invalid answer is wrong under gold. A query whose task compares no answers (code, free text, or a task of
its own without a task-free extractor) gets no label. Scores from ``labels.feedback`` then override any label.
Unlabelled rows keep a null ``correct`` and a null ``label_source``; the summary counts them per task and reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.labels.answer_matrix import AnswerMatrix, TaskFreeExtractor, answer_matrix
from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.feedback import read_feedback
from jouleroute.labels.sources import FEEDBACK, GOLD, VOTE, reference_source


@dataclass
class Labelled:
    profile: pd.DataFrame  # the input's rows, ``correct`` replaced by the labels, plus ``label_source``
    summary: dict = field(default_factory=dict)


def apply_labels(profile: pd.DataFrame, cfg: LabelsConfig, task_free: TaskFreeExtractor | None = None,
                 repo_root: Path = Path(".")) -> Labelled:
    """``profile`` labelled by ``cfg`` (module doc); ``task_free`` reads the answers of tasks the project does
    not know; ``labels.feedback`` is read relative to ``repo_root``."""
    out = profile.copy()
    reasons: dict[str, str] = {}
    if cfg.source == GOLD:
        out["correct"] = out["correct"].astype(float)  # a query without gold stays ungraded: no label
        out["label_source"] = np.where(out["correct"].isna(), None, GOLD)
    else:
        matrix = answer_matrix(profile, task_free)
        if cfg.source == VOTE:
            labels, reasons, source = *vote_labels(matrix), VOTE
        else:
            labels, reasons, source = *reference_labels(matrix, _reference_column(matrix, cfg.reference)), \
                reference_source(cfg.reference)
        rows = [matrix.cell(q, c) for q, c in zip(profile["query_id"], profile["candidate_id"])]
        out["correct"] = [labels[q, k] for q, k in rows]
        out["label_source"] = np.where(out["correct"].isna(), None, source)
    feedback = _apply_feedback(out, cfg, repo_root) if cfg.feedback else None
    return Labelled(out, _summary(out, cfg, reasons, feedback))


def reference_labels(matrix: AnswerMatrix, reference: int) -> tuple[np.ndarray, dict[str, str]]:
    """[Q, K] labels (NaN: none) and the reason of each unlabelled query: agreement with column ``reference``."""
    labels = np.full(matrix.present.shape, np.nan)
    reasons = {}
    for q, query_id in enumerate(matrix.query_ids):
        reason = _unlabelled(matrix, q) or (None if matrix.agree[q, reference, reference] else "reference_no_answer")
        if reason:
            reasons[query_id] = reason
        else:
            labels[q] = matrix.agree[q, reference]
    return labels, reasons


def vote_labels(matrix: AnswerMatrix) -> tuple[np.ndarray, dict[str, str]]:
    """[Q, K] labels (NaN: none) and the reason of each unlabelled query: agreement with the plurality answer."""
    labels = np.full(matrix.present.shape, np.nan)
    reasons = {}
    for q, query_id in enumerate(matrix.query_ids):
        agree = matrix.agree[q]
        support = agree.sum(axis=1)  # how many answers (its own included) each candidate's answer agrees with
        top = int(np.argmax(support))
        tied = [k for k in np.flatnonzero(support == support[top]) if not agree[top, k]]
        reason = _unlabelled(matrix, q) or ("no_answer" if support[top] == 0 else "tie" if tied else None)
        if reason:
            reasons[query_id] = reason
        else:
            labels[q] = agree[top]
    return labels, reasons


def _unlabelled(matrix: AnswerMatrix, q: int) -> str | None:
    return None if matrix.comparable[q] else "no_comparable_answer"


def _reference_column(matrix: AnswerMatrix, reference: str | None) -> int:
    if reference not in matrix.candidates:
        raise ValueError(f"labels.reference {reference!r} is no candidate of the profile; candidates: "
                         f"{', '.join(matrix.candidates)}")
    return matrix.candidates.index(reference)


def _apply_feedback(out: pd.DataFrame, cfg: LabelsConfig, repo_root: Path) -> dict:
    scores = read_feedback(repo_root / cfg.feedback, cfg.feedback)
    keyed = scores.set_index(["query_id", "candidate_id"])["score"]
    pairs = pd.MultiIndex.from_frame(out[["query_id", "candidate_id"]].astype(str))
    score = keyed.reindex(pairs).to_numpy()
    hit = ~np.isnan(score)
    out.loc[hit, "correct"] = score[hit]
    out.loc[hit, "label_source"] = FEEDBACK
    return {"file": cfg.feedback, "pairs": len(scores), "scores": int(scores["scores"].sum()),
            "applied_rows": int(hit.sum()), "unmatched_pairs": int((~keyed.index.isin(pairs)).sum())}


def _summary(out: pd.DataFrame, cfg: LabelsConfig, reasons: dict[str, str], feedback: dict | None) -> dict:
    per_query = out.drop_duplicates("query_id").set_index("query_id")["task"]
    labelled = out.groupby("query_id")["label_source"].agg(lambda s: s.notna().any())
    by_task = {}
    for task, queries in per_query.groupby(per_query, sort=True):
        ids = queries.index
        rows = out[out["task"] == task]
        by_task[str(task)] = {
            "queries": len(ids), "labelled_queries": int(labelled[ids].sum()),
            "unlabelled_queries": int((~labelled[ids]).sum()),
            "unlabelled_by_reason": dict(sorted(Counter(reasons[q] for q in ids if q in reasons and not labelled[q])
                                                .items())),
            "rows_by_source": {str(k): int(v) for k, v in rows["label_source"].value_counts().sort_index().items()},
            "unlabelled_rows": int(rows["label_source"].isna().sum())}
    summary = {"source": cfg.source, "reference": cfg.reference, "by_task": by_task,
               "labelled_queries": sum(t["labelled_queries"] for t in by_task.values()),
               "unlabelled_queries": sum(t["unlabelled_queries"] for t in by_task.values()),
               "unlabelled_by_reason": dict(sorted(sum((Counter(t["unlabelled_by_reason"]) for t in by_task.values()),
                                                       Counter()).items()))}
    if cfg.reference:
        summary["reference_correct_by_definition"] = (
            f"{cfg.reference}'s own answers are labelled correct wherever it gave a comparable one: its accuracy "
            "under these labels says nothing about it")
    if feedback is not None:
        summary["feedback"] = feedback
    return summary
