"""The profile every later stage trains on: the tournament's answers labelled by ``labels`` (stage ``labels``).

A query is kept only when every one of its rows carries a label: a router learns from whole queries (which
candidate to pick), so a query the labels leave half-marked would teach it about some candidates only. The
left-out queries are listed and counted by reason. Where the tournament's profile carries gold (``correct`` not
null) and the labels are not gold, :func:`label_profile` also measures them against it (``quality.label_quality``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from jouleroute.benchmarks.task_free import extract_answer
from jouleroute.labels.config import LabelsConfig
from jouleroute.labels.policies import apply_labels
from jouleroute.labels.quality import label_quality
from jouleroute.labels.sources import GOLD
from jouleroute.schema import profile_schema

LABEL_SOURCE_FIELD = pa.field("label_source", pa.string(), nullable=False)


@dataclass
class LabelledProfile:
    table: pa.Table  # the kept rows: the profile's columns, ``correct`` from the labels, plus ``label_source``
    summary: dict  # what was labelled, by which source, and what was left out (``policies`` summary, completed)
    quality: dict  # the labels against gold where gold exists (``{"measured": false, ...}`` otherwise)

    def metrics(self) -> dict[str, float]:
        """The stage's MLflow metrics: coverage, and agreement with gold where it was measured."""
        out = {k: float(self.summary[k]) for k in ("queries", "labelled_queries", "unlabelled_queries", "coverage")}
        overall = self.quality.get("overall") or {}
        out |= {f"gold.{k}": float(overall[k]) for k in ("precision", "recall", "agreement")
                if overall.get(k) is not None}
        for task, figures in (self.quality.get("by_task") or {}).items():
            if figures.get("agreement") is not None:
                out[f"gold.{task}.agreement"] = float(figures["agreement"])
        return out


def label_profile(graded: pd.DataFrame, cfg: LabelsConfig, root: Path, task_free=extract_answer) -> LabelledProfile:
    """``graded`` (the tournament's profile) labelled by ``cfg``; ``labels.feedback`` is read under ``root``."""
    labelled = apply_labels(graded, cfg, task_free, root)
    rows = labelled.profile
    whole = rows.groupby("query_id", sort=False)["label_source"].transform(lambda s: bool(s.notna().all()))
    kept = rows[whole.astype(bool)].reset_index(drop=True)
    left_out = sorted(set(rows.loc[~whole.astype(bool), "query_id"]))
    if kept.empty:
        raise ValueError(f"labels.source {cfg.source!r} labels no query of the profile "
                         f"({len(left_out)} queries, reasons {labelled.summary['unlabelled_by_reason']}): "
                         + ("the queries carry no gold answer: choose labels.source reference or vote"
                            if cfg.source == GOLD else "no answer could be compared"))
    n_queries = rows["query_id"].nunique()
    sources = {str(k): int(v) for k, v in kept["label_source"].value_counts().sort_index().items()}
    summary = {**labelled.summary, "queries": n_queries, "labelled_queries": kept["query_id"].nunique(),
               "unlabelled_queries": len(left_out), "coverage": round(kept["query_id"].nunique() / n_queries, 6),
               "unlabelled_query_ids": left_out, "rows_by_source": sources,
               "source_label": ",".join(sources), "rows": len(kept)}
    return LabelledProfile(_table(kept), summary, _quality(rows, graded, cfg))


def _quality(rows: pd.DataFrame, graded: pd.DataFrame, cfg: LabelsConfig) -> dict:
    gold = graded[graded["correct"].notna()]
    if cfg.source == GOLD and not cfg.feedback:
        return {"measured": False, "why": "the labels are the gold answers"}
    if gold.empty:
        return {"measured": False, "why": "no query carries a gold answer"}
    return {"measured": True, **label_quality(rows, gold)}


def _table(kept: pd.DataFrame) -> pa.Table:
    base = profile_schema(kept["correct"])
    schema = pa.schema([base.field(name) for name in base.names if name in kept.columns] + [LABEL_SOURCE_FIELD])
    correct_type = schema.field("correct").type
    frame = kept.assign(correct=kept["correct"].astype("int8" if correct_type == pa.int8() else "float64"))
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
