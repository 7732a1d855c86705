"""LM-router speed: the full scoring router against the fast one that is deployed, in one run.

Both route the same test questions, with the same prompts (the replay study's router spec:
scaffold stripped, the same token budget), the same batch size and the same torch threads:

* full: the scoring router of main at 3261796, reproduced here: SmolLM2-135M-Instruct with
  all 30 decoder layers, fp32, and the full 49k-token head at the last position
  (``logits_to_keep=1``), of which the label logits were read;
* fast: the deployed configuration read from the study's params: the first
  ``sft.router_layers`` decoder layers (early exit) and ``router.quantize`` (int8 dynamic
  quantization of the decoder on CPU), with only the label rows of the head applied.

Speed does not depend on the weights' values, so both use the converted base model (the
``models`` stage); decision agreement of trained routers is measured on the study's val split
by ``scripts/router_levers.py`` and stated in docs/router-training.md.

    .venv/bin/python benchmarks/bench_router_scoring.py [--queries 96] [--threads 1]

Writes benchmarks/results/router_scoring.json.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from _common import conditions, write_result

from jouleroute.config import load_params
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.routing.lm.scoring import left_padded
from jouleroute.training.trunk import keep_first_layers

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "artifacts/models/smollm2-135m"
STUDY = ROOT / "studies/replay/params.yaml"


def test_queries(n: int) -> pd.DataFrame:
    for path in (ROOT / "artifacts/replay/queries.parquet", ROOT / "artifacts/prepare/queries.parquet"):
        if path.exists():
            frame = pd.read_parquet(path)
            return frame[frame["split"] == "test"].sample(n=n, random_state=0).reset_index(drop=True)
    raise SystemExit("no query table: run `make study` (replay) or `dvc repro prepare` first")


def router_folder(tmp: Path, name: str, layers: int | None) -> Path:
    from transformers import AutoModelForCausalLM

    folder = tmp / name
    spec = ROOT / "artifacts/replay/router_data/router_spec.json"
    if not spec.exists():
        raise SystemExit("needs artifacts/replay/router_data/router_spec.json: run `make study` first")
    shutil.copytree(MODEL, folder)
    if layers is not None:
        model = keep_first_layers(AutoModelForCausalLM.from_pretrained(str(folder)), layers)
        model.save_pretrained(str(folder))
    shutil.copy(spec, folder)
    return folder


@torch.inference_mode()
def full_label_logits(model, prompts, label_ids, pad_id):
    """The label scoring of main at 3261796: the whole head at the last position, then the label columns."""
    ids, mask, positions = left_padded(prompts, pad_id)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1, use_cache=False)
    return out.logits[:, -1, list(label_ids)].float().numpy()


def full_rate(router: LMRouter, queries: pd.DataFrame, repeats: int, batch_size: int = 16) -> float:
    prompts = router.prompts(queries)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # batched by length, as the router does
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for start in range(0, len(order), batch_size):
            full_label_logits(router.model, [prompts[i] for i in order[start:start + batch_size]],
                              router.label_ids, router.tokenizer.pad_token_id)
        best = min(best, time.perf_counter() - started)
    return len(prompts) / best


def rate(router: LMRouter, queries: pd.DataFrame, repeats: int) -> float:
    """Best of ``repeats`` fresh passes, in routings per second."""
    best = float("inf")
    for _ in range(repeats):
        router._last = None  # a fresh pass, not the memoized scores
        started = time.perf_counter()
        router.score(queries)
        best = min(best, time.perf_counter() - started)
    return len(queries) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=None, help="early exit to try (default: the study's sft.router_layers)")
    parser.add_argument("--quantize", default=None, help="none | int8 | auto (default: the study's router.quantize)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    params = load_params(STUDY)
    layers = args.layers if args.layers is not None else params.sft.router_layers
    quantize = args.quantize or params.router.quantize
    queries = test_queries(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        full = LMRouter(router_folder(Path(tmp), "full", None),
                        cfg=RouterConfig(batch_size=16, threads=args.threads, quantize="none"))
        fast = LMRouter(router_folder(Path(tmp), "fast", layers),
                        cfg=RouterConfig(batch_size=16, threads=args.threads, quantize=quantize))
        assert full.prompts(queries) == fast.prompts(queries)  # the same prompts, token for token
        full_routings, fast_routings = full_rate(full, queries, args.repeats), rate(fast, queries, args.repeats)
        tokens = sum(len(p) for p in full.prompts(queries)) / len(queries)
    payload = {
        "conditions": conditions(),
        "queries": len(queries),
        "mean_prompt_tokens": round(tokens, 1),
        "full": {"layers": full.model.config.num_hidden_layers, "quantize": "none", "head": "full vocabulary",
                 "routings_per_s": full_routings},
        "fast": {"layers": fast.model.config.num_hidden_layers, "quantize": "int8" if fast.quantized else "none",
                 "head": "label rows", "routings_per_s": fast_routings},
        "speedup_fast_vs_full": fast_routings / full_routings,
        "targets": {"speedup_fast_vs_full": ">= 10"},
    }
    print(write_result("router_scoring", payload))
    print(f"full {full_routings:.2f} routings/s, fast {fast_routings:.2f} routings/s: "
          f"x{fast_routings / full_routings:.1f}")


if __name__ == "__main__":
    main()
