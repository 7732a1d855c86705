"""Tournament levers for multiple-choice rows, measured as ratios in one run on the real embedded models.

For the same multiple-choice queries (bundled ARC-Easy, MMLU, HellaSwag; the prompts the
`loglik` candidates send), per model:

* generate: a zero-shot direct-answer generation of up to 12 tokens (the old `direct` style)
  for the same questions, one batch of 8 (the old tournament path);
* loglik, unshared: every choice as its own full sequence (context re-read once per choice);
* loglik, shared: the shipped path (jouleroute/backends/loglik.py): contexts once, KV cache
  shared by the choices, LM head on real positions only, one batch of 8;

Ratios are seconds per query relative to the shipped path, plus the shipped path's accuracy,
so the speed-up is never bought with a different answer (shared == unshared choices).

    .venv/bin/python benchmarks/bench_loglik.py [--queries 24] [--threads 1]

Writes benchmarks/results/loglik_levers.json.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from _common import conditions, write_result
from jouleroute.backends import GenRequest
from jouleroute.backends.base import best_normalized
from jouleroute.backends.loglik import split_tokens
from jouleroute.backends.transformers_backend import TransformersBackend
from jouleroute.benchmarks import get_task

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("arc_easy", "mmlu", "hellaswag")


def queries(n: int) -> list[tuple[object, dict]]:
    picked = []
    for name in TASKS:
        task = get_task(name)
        docs = task.load(ROOT / "data/external/benchmarks")
        random.Random(0).shuffle(docs)
        picked += [(task, {**d, "choices_json": json.dumps(d["choices"])}) for d in docs[: n // len(TASKS)]]
    return picked


def unshared(backend, request) -> list[float]:
    """Each choice as its own full forward pass (what a naive implementation does)."""
    totals = []
    for continuation in request.continuations:
        context_ids, ids = split_tokens(backend.tokenizer, request.context, continuation)
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([context_ids + ids])).logits[0]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        totals.append(sum(float(logprobs[len(context_ids) + j - 1, t]) for j, t in enumerate(ids)))
    return totals


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def bench_model(name: str, picked) -> dict:
    backend = TransformersBackend(str(ROOT / "artifacts/models" / name), device="cpu")
    requests = [task.loglik_request(row, 0, data_dir=ROOT / "data/external/benchmarks") for task, row in picked]
    gen = [GenRequest(prompt=None, messages=task.chat_messages(row, "direct"), max_new_tokens=12)
           if backend.tokenizer.chat_template else
           GenRequest(prompt=task.fewshot_prompt(row, "direct", k=0, data_dir=ROOT / "data/external/benchmarks"), max_new_tokens=12, stop=["\n\n", "\nQuestion:"])
           for task, row in picked]
    backend.loglik(requests[:2])  # warm up
    t_shared, results = timed(lambda: [r for i in range(0, len(requests), 8) for r in backend.loglik(requests[i:i + 8])])
    t_unshared, naive = timed(lambda: [unshared(backend, r) for r in requests])
    t_gen, _ = timed(lambda: [r for i in range(0, len(gen), 8) for r in backend.generate(gen[i:i + 8])])
    same = all(res.text == f"Answer: {req.labels[best_normalized(ll, req.continuations)]}"
               for res, req, ll in zip(results, requests, naive))
    accuracy = sum(task.grade_row(res.text, row).correct for (task, row), res in zip(picked, results)) / len(picked)
    n = len(picked)
    backend.close()
    return {
        "s_per_query": {"loglik_shared_batched": t_shared / n, "loglik_unshared": t_unshared / n, "generate_direct": t_gen / n},
        "speedup_vs_unshared": t_unshared / t_shared,
        "speedup_vs_generate": t_gen / t_shared,
        "same_choices_as_unshared": same,
        "loglik_accuracy": accuracy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    picked = queries(args.queries)
    result = {"what": __doc__.splitlines()[0], "queries": len(picked), "tasks": list(TASKS),
              "conditions": conditions(),
              "models": {name: bench_model(name, picked) for name in ("smollm2-135m", "gemma3-270m")}}
    print(json.dumps(result["models"], indent=2))
    write_result("loglik_levers", result)


if __name__ == "__main__":
    main()
