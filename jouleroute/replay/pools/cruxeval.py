"""CRUXEval's output- and input-prediction outcomes (open-weight code models) as a public pool.

Correctness is pass@1, a fraction in [0, 1], kept as an expected correctness. Output tokens are not recorded:
an assumption per prompting style (``OUTPUT_TOKENS``), stated in the report. The split is by function
(``sample_id``), so both tasks of a function share it; val is carved from train by function too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.paths import relative_to
from jouleroute.replay.config import PublicPoolConfig
from jouleroute.replay.pools import PoolTable, PublicPool, check_models, mapped, register_pool
from jouleroute.replay.tables import carve_val

# CRUXEval records no output lengths: tokens per answer, by prompting style (models.csv `prompting`)
OUTPUT_TOKENS = {"direct": 40, "cot": 250}

CL = "codellama/CodeLlama-{}-hf"
MODELS = {
    **{f"codellama-{s}{cot}": mapped(f"codellama-{s}{cot.replace('+', '-')}", CL.format(s), "the same model", "code")
       for s in ("7b", "13b", "34b") for cot in ("", "+cot")},
    **{f"codellama-python-{s}": mapped(f"codellama-python-{s}", CL.format(s), "a CodeLlama fine-tune: the same "
                                       "architecture", "code") for s in ("7b", "13b", "34b")},
    "codetulu-2-34b": mapped("codetulu-2-34b", CL.format("34b"), "a CodeLlama-34B fine-tune", "code"),
    "phind": mapped("phind-34b", CL.format("34b"), "Phind-CodeLlama-34B-v2, a CodeLlama-34B fine-tune", "code"),
    "wizard-34b": mapped("wizardcoder-34b", CL.format("34b"), "WizardCoder-Python-34B, a CodeLlama-34B fine-tune",
                         "code"),
    "wizard-13b": mapped("wizardcoder-13b", CL.format("13b"), "WizardCoder-Python-13B, a CodeLlama-13B fine-tune",
                         "code"),
    "deepseek-base-6.7b": mapped("deepseek-coder-6.7b", CL.format("7b"), "a 6.7B Llama-architecture model (32 layers, "
                                 "d_model 4096), the size class of CodeLlama-7B", "code"),
    "deepseek-instruct-6.7b": mapped("deepseek-coder-6.7b-instruct", CL.format("7b"), "a 6.7B Llama-architecture "
                                     "model (32 layers, d_model 4096), the size class of CodeLlama-7B", "code"),
    "magicoder-ds-7b": mapped("magicoder-ds-6.7b", CL.format("7b"), "a deepseek-coder-6.7B fine-tune (Llama "
                              "architecture), the size class of CodeLlama-7B", "code"),
    "deepseek-base-33b": mapped("deepseek-coder-33b", CL.format("34b"), "a 33B Llama-architecture model with 8 KV "
                                "heads, the size class of CodeLlama-34B", "code"),
    "deepseek-instruct-33b": mapped("deepseek-coder-33b-instruct", CL.format("34b"), "a 33B Llama-architecture model "
                                    "with 8 KV heads, the size class of CodeLlama-34B", "code"),
    "mistral-7b": mapped("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", "the same 7.2B Mistral architecture "
                         "(the base model; the instruct v0.3 was measured)"),
    "mixtral-8x7b": mapped("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", "the same architecture (the base "
                           "model; the instruct was measured). prefill_scale 0.276 = 12.9B active / 46.7B total",
                           prefill_scale=0.276),
}


def read(cfg: PublicPoolConfig, repo_root: Path) -> PoolTable:
    folder = repo_root / cfg.source_dir
    models = pd.read_csv(folder / "models.csv")
    prompting = dict(zip(models["model"], models["prompting"]))
    missing_style = sorted({prompting.get(m) for m in cfg.models} - set(OUTPUT_TOKENS))
    if missing_style:
        raise ValueError(f"{relative_to(folder / 'models.csv', repo_root)}: prompting {missing_style} has no "
                         "assumed output length (OUTPUT_TOKENS in jouleroute/replay/pools/cruxeval.py)")
    frames = []
    for path in sorted(folder.glob("cruxeval_*_*.csv")):
        frame = pd.read_csv(path)
        check_models([c for c in frame.columns if c not in ("sample_id", "prompt", "eval_name", "reference")],
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
                "correct": values.astype(float), "output_tokens": OUTPUT_TOKENS[prompting[model]],
            }))  # fmt: skip
    table = pd.concat(frames, ignore_index=True)
    # the split is by function (sample_id), so both tasks of a function share it; val is carved by function too
    function = table["query_id"].str.rsplit("/", n=1).str[1]
    table["split"] = carve_val(function, table["split"], cfg.val_fraction)
    notes = {
        "correct": "pass@1 in [0, 1], an expected correctness",
        "output_tokens_assumed": dict(OUTPUT_TOKENS),
        "prompting": {cfg.models[m].candidate_id: prompting[m] for m in cfg.models},
    }
    return PoolTable(table, notes)


register_pool(PublicPool(
    name="cruxeval", folder="outcomes/cruxeval", study="cruxeval",
    title="CRUXEval study: routing code reasoning across open-weight code models", origin="CRUXEval",
    what="CRUXEval's output- and input-prediction outcomes (open-weight code models, 6.7B-46.7B, direct and "
         "chain of thought)",
    split="by function (sample_id): both tasks of a function share its split; val carved from train by function",
    models=MODELS, read=read,
    source=dict(origin="github:crux-eval/eval-arena@012edd758d9ae7ef3d47a56a462e75ab2c659828 data/cruxeval_*.jsonl, "
                       "github:facebookresearch/cruxeval@190faf16d175b5847b0af05d937872b1fb395942 (tables derived; "
                       "see SOURCE.txt)",
                licence="MIT (cruxeval); eval-arena: no licence file",
                note="CRUXEval per-query pass@1 outcomes (tables derived from crux-eval/eval-arena; no public URL "
                     "serves these tables).")))
