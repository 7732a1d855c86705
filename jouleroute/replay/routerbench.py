"""Read RouterBench's per-query outcomes into one long table: a row per (query, model).

The files (data/external/outcomes/routerbench in the data root, see its SOURCE.txt) hold one row per query with,
for each model, a 0/1 score and the full response, both as recorded by RouterBench.
Prompts and responses are stored as Python list literals ("['text']"); they are parsed,
never evaluated. A record is kept only when every selected model has a score: in
arc_challenge 14 sample ids appear twice, once with only gpt-3.5 scored, and that rule
keeps the complete record of each pair (docs/replay.md).
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from jouleroute.paths import relative_to

log = logging.getLogger(__name__)

# jouleroute task name -> upstream file stem ("winograde" is RouterBench's spelling) and eval_name.
TASK_FILES = {"arc_challenge": "arc_challenge", "mbpp": "mbpp", "winogrande": "winograde"}
TASK_EVAL_NAMES = {"arc_challenge": "arc-challenge", "mbpp": "mbpp", "winogrande": "winogrande"}
UPSTREAM_SPLITS = ("train", "test")
RESPONSE_SUFFIX = "|model_response"


@dataclass
class RouterBenchOutcomes:
    """What the files hold for the selected models.

    ``queries``: query_id, task, split (train|test), question, source_file, source_row.
    ``outcomes``: query_id, task, split, model, correct (int8), output_text, source_file, source_row, source_field.
    """

    queries: pd.DataFrame
    outcomes: pd.DataFrame
    dropped_records: list[dict[str, object]] = field(default_factory=list)


def _parse_list_literal(text: object, where: str) -> str:
    """RouterBench's "['a', 'b']" -> "a\\n\\nb"; a malformed cell is an error naming where it is."""
    if not isinstance(text, str):
        raise ValueError(f"{where}: expected a list literal such as \"['text']\", got {text!r}")
    try:
        parts = ast.literal_eval(text)
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"{where}: not a Python list literal ({err.__class__.__name__})") from err
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"{where}: expected a list of strings, got {type(parts).__name__}")
    return "\n\n".join(parts)


def _read_file(path: Path, task: str, split: str, models: Sequence[str], repo_root: Path):
    frame = pd.read_csv(path)
    rel = relative_to(path, repo_root)
    for column in ("sample_id", "prompt", "eval_name"):
        if column not in frame.columns:
            raise ValueError(f"{rel}: missing column '{column}'")
    available = [c[: -len(RESPONSE_SUFFIX)] for c in frame.columns if c.endswith(RESPONSE_SUFFIX)]
    unknown = [m for m in models if m not in available or m not in frame.columns]
    if unknown:
        raise ValueError(f"{rel}: no outcomes for models {unknown}; models in this file: {available}")
    wrong_eval = frame["eval_name"] != TASK_EVAL_NAMES[task]
    if wrong_eval.any():
        row = int(np.flatnonzero(wrong_eval)[0])
        got = frame["eval_name"].iloc[row]
        raise ValueError(f"{rel} row {row} field 'eval_name': expected '{TASK_EVAL_NAMES[task]}', got {got!r}")

    scores = frame[list(models)]
    for model in models:
        bad = scores[model].notna() & ~scores[model].isin([0, 1])
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{rel} row {row} field '{model}': score must be 0 or 1, got {scores[model].iloc[row]!r}")
    complete = scores.notna().all(axis=1).to_numpy()
    dropped = [
        {"source_file": rel, "source_row": int(i), "sample_id": str(frame["sample_id"].iloc[i]),
         "unscored_models": [m for m in models if pd.isna(scores[m].iloc[i])]}
        for i in np.flatnonzero(~complete)
    ]

    kept = np.flatnonzero(complete)
    eval_names, sample_ids, prompts = (frame[c].tolist() for c in ("eval_name", "sample_id", "prompt"))
    query_ids = [f"routerbench/{eval_names[i]}/{sample_ids[i]}" for i in kept]
    queries = pd.DataFrame(
        {
            "query_id": query_ids,
            "task": task,
            "split": split,
            "question": [_parse_list_literal(prompts[i], f"{rel} row {i} field 'prompt'") for i in kept],
            "source_file": rel,
            "source_row": kept.astype(np.int64),
        }
    )
    per_model = []
    for model in models:
        column = f"{model}{RESPONSE_SUFFIX}"
        responses = frame[column].tolist()
        per_model.append(
            pd.DataFrame(
                {
                    "query_id": query_ids,
                    "task": task,
                    "split": split,
                    "model": model,
                    "correct": scores[model].to_numpy()[kept].astype(np.int8),
                    "output_text": [_parse_list_literal(responses[i], f"{rel} row {i} field '{column}'") for i in kept],
                    "source_file": rel,
                    "source_row": kept.astype(np.int64),
                    "source_field": model,
                }
            )
        )
    return queries, pd.concat(per_model, ignore_index=True), dropped


def _path(source_dir: Path, task: str, split: str) -> Path:
    path = source_dir / f"{TASK_FILES[task]}_{split}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"RouterBench file {path} not found (see docs/data.md: `jouleroute data fetch outcomes/routerbench`)")
    return path


def routerbench_models(source_dir: Path, tasks: Sequence[str]) -> list[str]:
    """Models with outcomes in every selected file, from the headers only (cheap: checks params before reading)."""
    per_file = []
    for task in tasks:
        for split in UPSTREAM_SPLITS:
            header = pd.read_csv(_path(source_dir, task, split), nrows=0).columns
            per_file.append([c[: -len(RESPONSE_SUFFIX)] for c in header if c.endswith(RESPONSE_SUFFIX)])
    return [m for m in per_file[0] if all(m in models for models in per_file[1:])]


def read_routerbench(
    source_dir: Path, tasks: Sequence[str], models: Sequence[str], repo_root: Path
) -> RouterBenchOutcomes:
    """Outcomes of ``models`` on ``tasks`` from both upstream splits, with RouterBench's split kept."""
    query_parts, outcome_parts, dropped = [], [], []
    for task in tasks:
        for split in UPSTREAM_SPLITS:
            queries, outcomes, lost = _read_file(_path(source_dir, task, split), task, split, models, repo_root)
            query_parts.append(queries)
            outcome_parts.append(outcomes)
            dropped.extend(lost)
    queries = pd.concat(query_parts, ignore_index=True)
    repeated = queries[queries["query_id"].duplicated(keep=False)]
    if not repeated.empty:
        where = "; ".join(f"{r.query_id} at {r.source_file} row {r.source_row}" for r in repeated.head(6).itertuples())
        raise ValueError(f"RouterBench query ids recorded more than once with complete scores: {where}")
    if dropped:
        log.warning("dropped %d RouterBench records with a missing score for a selected model", len(dropped))
    return RouterBenchOutcomes(queries, pd.concat(outcome_parts, ignore_index=True), dropped)


def hold_out_tasks(
    queries: pd.DataFrame, outcomes: pd.DataFrame, test_tasks: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep the test rows of ``test_tasks`` and the train rows of every other task (replay.test_tasks).

    Train tasks' test rows and test tasks' train rows are dropped: no query of a held-out task
    reaches training or validation, and test holds nothing else.
    """

    def kept(frame: pd.DataFrame) -> pd.DataFrame:
        keep = frame["task"].isin(list(test_tasks)) == frame["split"].eq("test")
        return frame[keep].reset_index(drop=True)

    return kept(queries), kept(outcomes)
