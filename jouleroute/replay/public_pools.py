"""Public outcome pools in the data root (ZeroEval's GSM8K + MATH level 5, CRUXEval) as import tables.

Each reader turns its pool's files into the table `jouleroute import` reads (docs/replay.md): one row per
(query, candidate) with the query text, the candidate's correctness, its output tokens and its model. The
pool is every open-weight model the params map to an ML.ENERGY reference of the same architecture and size
class (``public_pool.models``, each with its reason); which of them become candidates is decided on train
by :mod:`jouleroute.replay.pool_rule`.

- ZeroEval: correctness is regraded with the project's own graders (the GSM8K number grader, math-verify
  for MATH) from the model's final answer (``answer_simple``; its output tail when none was found); the
  agreement with the shipped ``correct_simple`` is reported. Output tokens: the recorded output length in
  characters times the model's tokens per character, counted with the replay tokenizer on its output tails.
- CRUXEval: correctness is pass@1, a fraction in [0, 1], kept as an expected correctness. Output tokens are
  not recorded: an assumption per prompting style (``cruxeval_output_tokens``), stated in the report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from jouleroute.paths import relative_to
from jouleroute.replay.config import PublicPoolConfig
from jouleroute.replay.tables import carve_val
from jouleroute.replay.tokens import count_tokens, load_tokenizer

log = logging.getLogger(__name__)

ZEROEVAL_TASKS = {"gsm8k": "gsm8k", "math_l5": "math_l5"}  # task in the files -> task in the profile


@dataclass
class PoolTable:
    table: pd.DataFrame  # the import table
    notes: dict = field(default_factory=dict)  # what the report says about how it was built


def _check_models(available: list[str], cfg: PublicPoolConfig, where: str) -> None:
    unknown = [m for m in cfg.models if m not in available]
    if unknown:
        raise ValueError(f"{where}: public_pool.models {unknown} have no outcomes there; models in it: {available}")


def zeroeval_table(cfg: PublicPoolConfig, repo_root: Path) -> PoolTable:
    from jouleroute.benchmarks.grading import grade_math, grade_number  # math-verify: only when grading

    folder = repo_root / cfg.source_dir
    questions = pd.read_csv(folder / "questions.csv", dtype={"qid": str, "gold_answer": str})
    frames = []
    for task in ZEROEVAL_TASKS:
        path = folder / f"outcomes_{task}.csv.gz"
        outcomes = pd.read_csv(path, dtype={"qid": str, "answer_simple": str, "output_tail": str},
                               keep_default_na=False)
        _check_models(sorted(outcomes["model"].unique()), cfg, relative_to(path, repo_root))
        frames.append(outcomes[outcomes["model"].isin(list(cfg.models))].assign(source_file=relative_to(path, repo_root)))
    rows = pd.concat(frames, ignore_index=True).merge(questions, on=["task", "qid"], how="left", validate="m:1")
    if rows["question"].isna().any():
        first = rows[rows["question"].isna()].iloc[0]
        raise ValueError(f"{cfg.source_dir}/questions.csv: no question for ({first.task}, {first.qid})")
    # every candidate must answer every query: keep the questions all mapped models answered
    answered = rows.groupby(["task", "qid"])["model"].nunique()
    complete = answered[answered == len(cfg.models)].index
    dropped = int(len(answered) - len(complete))
    rows = rows.set_index(["task", "qid"]).loc[complete].reset_index()

    correct, agree = [], []
    cache: dict[tuple[str, str, str], bool] = {}
    for task, answer, tail, gold, simple, status in zip(rows["task"], rows["answer_simple"], rows["output_tail"],
                                                        rows["gold_answer"], rows["correct_simple"], rows["status"]):
        text = answer if answer else tail
        key = (task, text, gold)
        if key not in cache:
            grade = grade_number if task == "gsm8k" else grade_math
            cache[key] = status == "ok" and bool(text) and grade(text, gold).correct
        correct.append(int(cache[key]))
        agree.append(int(cache[key]) == int(simple))
    rows["correct"] = correct

    tokenizer = load_tokenizer(repo_root / cfg.energy.tokenizer_file)
    per_char = {}
    for model, group in rows.groupby("model"):
        tails = [t for t in group["output_tail"] if t]
        counted = count_tokens(tokenizer, tails)
        per_char[model] = float(np.sum(counted) / max(1, sum(len(t) for t in tails)))
    tokens = [max(0, int(round(chars * per_char[m]))) for chars, m in zip(rows["output_chars"], rows["model"])]

    qid = [f"zeroeval/{t}/{q}" for t, q in zip(rows["task"], rows["qid"])]
    split = carve_val(pd.Series(qid), rows["split"].reset_index(drop=True), cfg.val_fraction)
    table = pd.DataFrame({
        "query_id": qid, "task": rows["task"].map(ZEROEVAL_TASKS), "prompt": rows["question"], "split": split,
        "gold": rows["gold_answer"], "candidate": rows["model"].map({n: m.candidate_id for n, m in cfg.models.items()}),
        "model": rows["model"], "correct": rows["correct"], "output_text": rows["output_tail"],
        "extracted_answer": rows["answer_simple"], "output_tokens": tokens,
    })  # fmt: skip
    notes = {
        "grading_agreement_with_shipped_check": round(float(np.mean(agree)), 4),
        "grading_agreement_by_task": {t: round(float(np.mean([a for a, tt in zip(agree, rows["task"]) if tt == t])), 4)
                                      for t in ZEROEVAL_TASKS},
        "tokens_per_char": {m: round(v, 4) for m, v in sorted(per_char.items())},
        "questions_dropped_incomplete": dropped,
        "output_tokens": "output_chars x the model's tokens per character on its output tails (replay tokenizer)",
    }
    log.info("zeroeval: %d rows, grading agrees with correct_simple on %.1f%%", len(table), 100 * np.mean(agree))
    return PoolTable(table, notes)


def cruxeval_table(cfg: PublicPoolConfig, repo_root: Path) -> PoolTable:
    folder = repo_root / cfg.source_dir
    models = pd.read_csv(folder / "models.csv")
    prompting = dict(zip(models["model"], models["prompting"]))
    missing_style = sorted({prompting.get(m) for m in cfg.models} - set(cfg.cruxeval_output_tokens))
    if missing_style:
        raise ValueError(f"public_pool.cruxeval_output_tokens has no entry for prompting {missing_style}")
    frames = []
    for path in sorted(folder.glob("cruxeval_*_*.csv")):
        frame = pd.read_csv(path)
        _check_models([c for c in frame.columns if c not in ("sample_id", "prompt", "eval_name", "reference")],
                      cfg, relative_to(path, repo_root))
        split = path.stem.rsplit("_", 1)[1]
        for model, entry in cfg.models.items():
            values = frame[model]
            bad = values.isna() | (values < 0) | (values > 1)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{relative_to(path, repo_root)} row {row} field '{model}': pass@1 must be in "
                                 f"[0, 1], got {values.iloc[row]!r}")
            frames.append(pd.DataFrame({
                "query_id": [f"cruxeval/{e}/{s}" for e, s in zip(frame["eval_name"], frame["sample_id"])],
                "task": frame["eval_name"], "prompt": frame["prompt"], "split": split,
                "gold": frame["reference"].astype(str), "candidate": entry.candidate_id, "model": model,
                "correct": values.astype(float), "output_tokens": cfg.cruxeval_output_tokens[prompting[model]],
            }))  # fmt: skip
    table = pd.concat(frames, ignore_index=True)
    # the split is by function (sample_id), so both tasks of a function share it; val is carved by function too
    function = table["query_id"].str.rsplit("/", n=1).str[1]
    table["split"] = carve_val(function, table["split"], cfg.val_fraction)
    notes = {
        "correct": "pass@1 in [0, 1], an expected correctness",
        "output_tokens_assumed": dict(cfg.cruxeval_output_tokens),
        "prompting": {cfg.models[m].candidate_id: prompting[m] for m in cfg.models},
    }
    return PoolTable(table, notes)


READERS = {"zeroeval_math": zeroeval_table, "cruxeval": cruxeval_table}
