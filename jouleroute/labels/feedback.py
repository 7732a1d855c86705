"""A user's scores of answers: a table of (query_id, candidate_id, score in [0, 1]) that overrides any label.

Read from parquet, CSV or JSONL. Several scores of one pair average (several users, or one user twice); a score
for a pair the profile does not hold is counted, not applied. Errors are one line naming the file and the row
(0-based, the header not counted).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ("query_id", "candidate_id", "score")


class FeedbackError(ValueError):
    """A feedback table that cannot be read; the message names the file, the row and the field."""


def read_feedback(path: Path, name: str | None = None) -> pd.DataFrame:
    """The mean score of each (query_id, candidate_id) in ``path``, plus how many scores it averages."""
    name = name or str(path)
    if not path.exists():
        raise FeedbackError(f"{name}: no such file (labels.feedback)")
    readers = {".parquet": pd.read_parquet, ".csv": pd.read_csv, ".jsonl": lambda p: pd.read_json(p, lines=True)}
    if path.suffix not in readers:
        raise FeedbackError(f"{name}: a feedback table is .parquet, .csv or .jsonl")
    try:
        frame = readers[path.suffix](path)
    except ValueError as error:
        raise FeedbackError(f"{name}: not a {path.suffix} table ({str(error).splitlines()[0]})") from None
    return mean_scores(frame, name)


def mean_scores(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise FeedbackError(f"{name}: no column {missing[0]!r}; a feedback table has {', '.join(COLUMNS)}")
    score = pd.to_numeric(frame["score"], errors="coerce")
    bad = score.isna() | ~score.between(0.0, 1.0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise FeedbackError(f"{name}: row {row}: score {frame['score'].tolist()[row]!r} is not a number in [0, 1]")
    for column in ("query_id", "candidate_id"):
        blank = frame[column].isna() | (frame[column].astype(str).str.strip() == "")
        if blank.any():
            raise FeedbackError(f"{name}: row {int(np.flatnonzero(blank.to_numpy())[0])}: no {column}")
    scores = frame.assign(score=score, query_id=frame["query_id"].astype(str),
                          candidate_id=frame["candidate_id"].astype(str))
    return (scores.groupby(["query_id", "candidate_id"], sort=True)["score"].agg(score="mean", scores="size")
            .reset_index())
