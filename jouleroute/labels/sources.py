"""Where a correctness value came from, and the check that a profile never mixes sources silently.

Every labelled profile row carries ``label_source``: ``gold`` (graded against the gold answer), ``reference:<name>``
(agrees with candidate ``<name>``'s answer), ``vote`` (agrees with the pool's plurality answer) or ``feedback`` (a
user's score). A row the policy could not label has a null source and a null ``correct``.
"""

from __future__ import annotations

import pandas as pd

GOLD, VOTE, FEEDBACK = "gold", "vote", "feedback"
REFERENCE_PREFIX = "reference:"


class LabelSourceError(ValueError):
    """A profile's labels break the label contract; the message is one line naming the file and the field."""


def reference_source(candidate: str) -> str:
    """The ``label_source`` of labels read from candidate ``candidate``'s answers."""
    return f"{REFERENCE_PREFIX}{candidate}"


def is_label_source(value: object) -> bool:
    if not isinstance(value, str):
        return False
    named_reference = value.startswith(REFERENCE_PREFIX) and len(value) > len(REFERENCE_PREFIX)
    return value in (GOLD, VOTE, FEEDBACK) or named_reference


def check_label_sources(profile: pd.DataFrame, allow_mixed: bool, where: str = "profile") -> dict:
    """Coverage of ``label_source`` over ``profile``'s rows; raises :class:`LabelSourceError` when the column is
    missing, a value is no known source, a label has no source (or a source no label), or the profile mixes two
    sources and ``allow_mixed`` is false. ``where`` names the file in the message."""
    if "label_source" not in profile.columns:
        raise LabelSourceError(f"{where}: no label_source column; every correctness value must say where it came "
                               "from (gold, reference:<candidate>, vote, feedback)")
    source, correct = profile["label_source"], profile["correct"]
    unknown = source.notna() & ~source.map(is_label_source)
    if unknown.any():
        raise LabelSourceError(f"{where}: label_source {source[unknown].iloc[0]!r} in {_row(profile, unknown)} is "
                               "none of gold, reference:<candidate>, vote, feedback")
    for mask, what in ((correct.notna() & source.isna(), "a correct value without a label_source"),
                       (correct.isna() & source.notna(), "a label_source without a correct value")):
        if mask.any():
            raise LabelSourceError(f"{where}: {_row(profile, mask)} has {what}")
    counts = {str(k): int(v) for k, v in source.value_counts().sort_index().items()}
    if len(counts) > 1 and not allow_mixed:
        mix = ", ".join(f"{k} ({v} rows)" for k, v in counts.items())
        raise LabelSourceError(f"{where}: label_source mixes {mix}; "
                               "set labels.allow_mixed: true to train on mixed labels")
    rows = len(profile)
    return {"rows": rows, "labelled_rows": int(source.notna().sum()), "unlabelled_rows": int(source.isna().sum()),
            "coverage": float(source.notna().mean()) if rows else 0.0, "rows_by_source": counts,
            "mixed": len(counts) > 1}


def _row(profile: pd.DataFrame, mask: pd.Series) -> str:
    first = profile[mask].iloc[0]
    pair = f"(query_id={first['query_id']!r}, candidate_id={first['candidate_id']!r})" \
        if {"query_id", "candidate_id"} <= set(profile.columns) else f"row {mask.to_numpy().nonzero()[0][0]}"
    more = int(mask.sum()) - 1
    return f"row {pair}" + (f" and {more} more" if more else "")
