"""LM-router speed: the full scoring router against the fast one that is deployed, in one run.

Both route the same test questions, with the same prompts (the replay study's router spec:
scaffold stripped, the same token budget), the same batch size and the same torch threads:

* full: the scoring router of main at 3261796, reproduced here: SmolLM2-135M-Instruct with
  all 30 decoder layers, fp32, and the full 49k-token head at the last position
  (``logits_to_keep=1``), of which the label logits were read;
* fast: the deployed configuration read from the study's params: the first
  ``sft.router_layers`` decoder layers (early exit) and ``router.quantize`` (int8 dynamic
  quantization of the decoder on CPU), with only the label rows of the head applied, and the
  shared prompt prefix's keys and values computed once (``SharedPrefix``); the same router
  without the prefix cache is timed too, and its label logits compared with the cached ones.

``--layers``, ``--quantize`` and ``--max-query-tokens`` (a shorter query budget: a measurement
only, since the budget is part of what the router was trained on; the full router keeps the
study's prompts) try other levers and write ``router_scoring-<levers>.json`` instead.

Speed does not depend on the weights' values, so both use the converted base model (the
``models`` stage); decision agreement of trained routers is measured on the study's val split
by ``experiments/router_levers.py`` and stated in docs/router-training.md.

    .venv/bin/python benchmarks/bench_router_scoring.py [--queries 96] [--threads 1] [--layers 4]

Writes benchmarks/results/router_scoring.json (the deployed configuration).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _common import conditions, write_result

from jouleroute.config import load_params
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.lm.scoring import label_logits, left_padded
from jouleroute.training.trunk import keep_first_layers

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "artifacts/models/smollm2-135m"
STUDY = ROOT / "studies/replay/params.yaml"


def test_queries(n: int) -> pd.DataFrame:
    for path in (ROOT / "studies/replay/artifacts/queries.parquet", ROOT / "artifacts/prepare/queries.parquet"):
        if path.exists():
            frame = pd.read_parquet(path)
            return frame[frame["split"] == "test"].sample(n=n, random_state=0).reset_index(drop=True)
    raise SystemExit("no query table: run `make study` (replay) or `dvc repro prepare` first")


def router_folder(tmp: Path, name: str, layers: int | None, max_query_tokens: int | None = None) -> Path:
    from transformers import AutoModelForCausalLM

    folder = tmp / name
    spec = ROOT / "studies/replay/artifacts/router_data/router_spec.json"
    if not spec.exists():
        raise SystemExit("needs studies/replay/artifacts/router_data/router_spec.json: run `make study` first")
    shutil.copytree(MODEL, folder)
    if layers is not None:
        model = keep_first_layers(AutoModelForCausalLM.from_pretrained(str(folder)), layers)
        model.save_pretrained(str(folder))
    raw = json.loads(spec.read_text())
    if max_query_tokens is not None:
        raw["max_query_tokens"] = max_query_tokens
    (folder / spec.name).write_text(json.dumps(raw))
    return folder


@torch.inference_mode()
def full_label_logits(model, prompts, label_ids, pad_id):
    """The label scoring of main at 3261796: the whole head at the last position, then the label columns."""
    ids, mask, positions = left_padded(prompts, pad_id)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1, use_cache=False)
    return out.logits[:, -1, list(label_ids)].float().numpy()


def full_pass(router: LMRouter, prompts: list[list[int]], batch_size: int = 16) -> None:
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # batched by length, as the router does
    for start in range(0, len(order), batch_size):
        full_label_logits(router.model, [prompts[i] for i in order[start:start + batch_size]],
                          router.label_ids, router.tokenizer.pad_token_id)


def prefix_agreement(router: LMRouter, queries: pd.DataFrame, batch_size: int = 16) -> dict:
    """Label logits with and without the prefix cache, same batches: the largest difference, in
    logits and as a share of their spread, and how often the top label differs."""
    prompts = router.prompts(queries)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    pad, cached, plain = router.tokenizer.pad_token_id, [], []
    for start in range(0, len(order), batch_size):
        batch = [prompts[i] for i in order[start:start + batch_size]]
        cached.append(label_logits(router.model, batch, router.label_ids, pad, router.prefix))
        plain.append(label_logits(router.model, batch, router.label_ids, pad))
    cached, plain = np.concatenate(cached), np.concatenate(plain)
    diff = float(np.max(np.abs(cached - plain)))
    return {"max_abs_logit_diff": diff, "max_diff_over_spread": diff / float(np.ptp(plain)),
            "top_label_differs": int(np.sum(cached.argmax(1) != plain.argmax(1)))}


def precision_agreement(router: LMRouter, fp32: LMRouter, queries: pd.DataFrame) -> dict:
    """Label logits of a lower-precision router against the same checkpoint at fp32, same prompts."""
    low, high = router.score(queries).merit, fp32.score(queries).merit
    diff = float(np.max(np.abs(low - high)))
    return {"max_abs_score_diff": diff, "max_diff_over_spread": diff / float(np.ptp(high)),
            "top_candidate_differs": int(np.sum(low.argmax(1) != high.argmax(1))), "queries": len(queries)}


def fresh_pass(router: LMRouter, queries: pd.DataFrame, prefix) -> None:
    router._last, router.prefix = None, prefix  # a fresh pass, not the memoized scores
    router.score(queries)


def best_rates(passes: dict, n: int, repeats: int) -> dict[str, dict[str, float]]:
    """Routings per second of each pass, best of ``repeats``, by the wall clock and by this process's
    CPU time (with one torch thread, what the pass itself used: less sensitive to other jobs on a shared
    machine). The passes take turns, so a change in the machine's load falls on all of them alike."""
    wall, cpu = dict.fromkeys(passes, float("inf")), dict.fromkeys(passes, float("inf"))
    for _ in range(repeats):
        for name, run in passes.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            run()
            wall[name] = min(wall[name], time.perf_counter() - started)
            cpu[name] = min(cpu[name], time.process_time() - cpu_started)
    return {name: {"routings_per_s": n / wall[name], "routings_per_cpu_s": n / cpu[name]} for name in passes}


def ratio(rates: dict, a: str, b: str, key: str) -> float:
    return rates[a][key] / rates[b][key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=None, help="early exit to try (default: the study's sft.router_layers)")
    parser.add_argument("--quantize", default=None, help="none | int8 | auto (default: the study's router.quantize)")
    parser.add_argument("--precision", default=None, help="fp32 | bf16 | auto (default: the study's router.precision)")
    parser.add_argument("--max-query-tokens", type=int, default=None,
                        help="a shorter query budget for the fast router (measurement only: it changes training)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    params = load_params(STUDY)
    layers = args.layers if args.layers is not None else params.sft.router_layers
    quantize = args.quantize or params.router.quantize
    precision = args.precision or params.router.precision
    levers = "".join([f"-L{layers}" if args.layers is not None else "",
                      f"-{quantize}" if args.quantize is not None else "",
                      f"-{precision}" if args.precision is not None else "",
                      f"-q{args.max_query_tokens}" if args.max_query_tokens is not None else ""])
    queries = test_queries(args.queries)
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        full = LMRouter(router_folder(Path(tmp), "full", None),
                        cfg=RouterConfig(batch_size=16, threads=args.threads, quantize="none"))
        fast_folder = router_folder(Path(tmp), "fast", layers, args.max_query_tokens)
        fast = LMRouter(fast_folder, cfg=RouterConfig(batch_size=16, threads=args.threads, quantize=quantize,
                                                      precision=precision))
        low_precision = None
        if fast.model.dtype != torch.float32:  # the same router at fp32: how far its logits move
            twin = LMRouter(fast_folder, cfg=RouterConfig(batch_size=16, threads=args.threads, quantize=quantize,
                                                          precision="fp32"))
            low_precision = precision_agreement(fast, twin, queries)
            del twin
        if args.max_query_tokens is None:
            assert full.prompts(queries) == fast.prompts(queries)  # the same prompts, token for token
        assert fast.prefix is not None and all(fast.prefix.fits(p) for p in fast.prompts(queries))
        agreement = prefix_agreement(fast, queries)
        prompts, prefix = full.prompts(queries), fast.prefix
        rates = best_rates({"full": lambda: full_pass(full, prompts),
                            "fast": lambda: fresh_pass(fast, queries, prefix),
                            # the same router, every prompt read from its first token
                            "uncached": lambda: fresh_pass(fast, queries, None)}, len(queries), args.repeats)
        tokens = sum(len(p) for p in full.prompts(queries)) / len(queries)
        fast_tokens = sum(len(p) for p in fast.prompts(queries)) / len(queries)
    payload = {
        "conditions": cond,
        "queries": len(queries),
        "mean_prompt_tokens": round(tokens, 1),
        "full": {"layers": full.model.config.num_hidden_layers, "quantize": "none", "head": "full vocabulary",
                 "prefix_cache": False, "max_query_tokens": full.spec.max_query_tokens, **rates["full"]},
        "fast": {"layers": fast.model.config.num_hidden_layers, "quantize": "int8" if fast.quantized else "none",
                 "dtype": str(fast.model.dtype).removeprefix("torch."),
                 "head": "label rows", "prefix_cache": True, "prefix_tokens": len(prefix),
                 "max_query_tokens": fast.spec.max_query_tokens, "mean_prompt_tokens": round(fast_tokens, 1),
                 **rates["fast"]},
        "fast_without_prefix_cache": rates["uncached"],
        "fast_vs_fp32_twin": low_precision,
        "prefix_cache_vs_uncached": agreement,
        "speedup_fast_vs_full": ratio(rates, "fast", "full", "routings_per_s"),
        "speedup_fast_vs_full_cpu": ratio(rates, "fast", "full", "routings_per_cpu_s"),
        "speedup_prefix_cache": ratio(rates, "fast", "uncached", "routings_per_s"),
        "speedup_prefix_cache_cpu": ratio(rates, "fast", "uncached", "routings_per_cpu_s"),
        "targets": {"speedup_fast_vs_full": ">= 10"},
    }
    print(write_result("router_scoring" + levers, payload))
    print(json.dumps({k: v for k, v in payload.items() if k != "conditions"}, indent=1))


if __name__ == "__main__":
    main()
