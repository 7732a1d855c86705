"""ZeroEval's GSM8K and MATH level 5 outcomes (open-weight models, 2.6B-405B) as a public pool.

Correctness is regraded with the project's own graders (the GSM8K number grader, math-verify for MATH) from
the model's final answer (``answer_simple``; its output tail when none was found); the agreement with the
shipped ``correct_simple`` is reported. Output tokens: the recorded output length in characters times the
model's tokens per character, counted with the replay tokenizer on its output tails. The split is ZeroEval's
own, by question; val is carved from train by a hash of the query id (``public_pool.val_fraction``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.paths import relative_to
from jouleroute.replay.config import PublicPoolConfig
from jouleroute.replay.pools import PoolTable, PublicPool, check_models, mapped, register_pool
from jouleroute.replay.tables import carve_val
from jouleroute.replay.tokens import count_tokens, load_tokenizer

log = logging.getLogger(__name__)

TASKS = {"gsm8k": "gsm8k", "math_l5": "math_l5"}  # task in the files -> task in the profile

L31_8B, L31_70B, L31_405B = ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct",
                             "meta-llama/Meta-Llama-3.1-405B-Instruct")
MODELS = {
    "gemma-2-2b-it": mapped("gemma-2-2b-it", "google/gemma-2-2b-it", "the same model"),
    "Phi-3.5-mini-instruct": mapped("phi-3.5-mini", "microsoft/Phi-3-mini-4k-instruct",
                                    "the same 3.8B Phi-3-mini architecture (32 layers, d_model 3072)"),
    "Meta-Llama-3-8B-Instruct": mapped("llama-3-8b", L31_8B,
                                       "the same 8B Llama-3 architecture; 3.1 is the measured revision"),
    "Meta-Llama-3.1-8B-Instruct": mapped("llama-3.1-8b", L31_8B, "the same model"),
    "gemma-2-9b-it": mapped("gemma-2-9b-it", "google/gemma-2-9b-it", "the same model"),
    "Athene-70B": mapped("athene-70b", L31_70B, "a Llama-3-70B fine-tune: the same 70B Llama architecture"),
    "Meta-Llama-3-70B-Instruct": mapped("llama-3-70b", L31_70B,
                                        "the same 70B Llama-3 architecture; 3.1 is the measured revision"),
    "Meta-Llama-3.1-70B-Instruct": mapped("llama-3.1-70b", L31_70B, "the same model"),
    "Mistral-Large-2": mapped("mistral-large-2", "mistralai/Mistral-Large-Instruct-2407",
                              "the same model (Mistral-Large-Instruct-2407)"),
    "Llama-3.1-405B-Inst@sambanova": mapped("llama-3.1-405b", L31_405B, "the same model, served by SambaNova"),
}


def read(cfg: PublicPoolConfig, repo_root: Path) -> PoolTable:
    from jouleroute.benchmarks.grading import grade_math, grade_number  # math-verify: only when grading

    folder = repo_root / cfg.source_dir
    questions = pd.read_csv(folder / "questions.csv", dtype={"qid": str, "gold_answer": str})
    frames = []
    for task in TASKS:
        path = folder / f"outcomes_{task}.csv.gz"
        outcomes = pd.read_csv(path, dtype={"qid": str, "answer_simple": str, "output_tail": str},
                               keep_default_na=False)
        check_models(sorted(outcomes["model"].unique()), cfg, relative_to(path, repo_root))
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
        "query_id": qid, "task": rows["task"].map(TASKS), "prompt": rows["question"], "split": split,
        "gold": rows["gold_answer"], "candidate": rows["model"].map({n: m.candidate_id for n, m in cfg.models.items()}),
        "model": rows["model"], "correct": rows["correct"], "output_text": rows["output_tail"],
        "extracted_answer": rows["answer_simple"], "output_tokens": tokens,
    })  # fmt: skip
    notes = {
        "grading_agreement_with_shipped_check": round(float(np.mean(agree)), 4),
        "grading_agreement_by_task": {t: round(float(np.mean([a for a, tt in zip(agree, rows["task"]) if tt == t])), 4)
                                      for t in TASKS},
        "tokens_per_char": {m: round(v, 4) for m, v in sorted(per_char.items())},
        "questions_dropped_incomplete": dropped,
        "output_tokens": "output_chars x the model's tokens per character on its output tails (replay tokenizer)",
    }
    log.info("zeroeval: %d rows, grading agrees with correct_simple on %.1f%%", len(table), 100 * np.mean(agree))
    return PoolTable(table, notes)


register_pool(PublicPool(
    name="zeroeval_math", folder="outcomes/zeroeval_math", study="zeroeval-math",
    title="ZeroEval study: routing GSM8K and MATH level 5 across an open-weight pool", origin="ZeroEval",
    what="ZeroEval's GSM8K and MATH level 5 outcomes (open-weight models, 2.6B-405B)",
    split="ZeroEval's own split by question; val carved from train by a hash of the query id",
    models=MODELS, read=read,
    source=dict(origin="github:WildEval/ZeroEval@8c1485edf12c6efb5f69135a562927c5ad484059 result_dirs/ (tables "
                       "derived from its generations; see SOURCE.txt)",
                licence="Apache-2.0 (ZeroEval); GSM8K, MATH: MIT",
                note="ZeroEval per-query outcomes on GSM8K and MATH level 5 (tables derived from WildEval/ZeroEval's "
                     "result_dirs; no public URL serves these tables).")))
