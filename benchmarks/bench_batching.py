"""Batched vs one-at-a-time generation on the same queries, with the real packaged models.

For each model: 8 queries, generated one at a time (batch 1) and as one batch of 8, greedy,
same max_new_tokens. Reports output tokens/s for both, their ratio, the estimated energy per
output token (CPU-time estimate, labelled), and the cost of a prompt token relative to a
generated token (which backs energy.prefill_weight). Writes results/batching.json.

    .venv/bin/python benchmarks/bench_batching.py [--models smollm2-135m gemma3-270m] [--max-new-tokens 48]
                                                  [--torch-threads 1]  # on a shared, busy machine
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from _common import conditions, write_result

from jouleroute.backends import GenRequest
from jouleroute.backends.transformers_backend import TransformersBackend
from jouleroute.energy import EstimateMeter

QUESTIONS = [
    "What is the capital of France?",
    "How many legs does a spider have?",
    "What is 7 times 8?",
    "Name the largest planet in the solar system.",
    "What colour is the sky on a clear day?",
    "Who wrote Romeo and Juliet?",
    "What is the boiling point of water in Celsius?",
    "How many days are in a leap year?",
]
FEWSHOT = "Q: What is the capital of Italy?\nA: Rome\n\nQ: How many legs does a dog have?\nA: Four\n\nQ: {q}\nA:"


def make_requests(chat: bool, max_new_tokens: int) -> list[GenRequest]:
    if chat:
        return [GenRequest(messages=[{"role": "user", "content": q}], max_new_tokens=max_new_tokens) for q in QUESTIONS]
    return [GenRequest(prompt=FEWSHOT.format(q=q), max_new_tokens=max_new_tokens, stop=["\n\n", "\nQ:"]) for q in QUESTIONS]


def timed(backend, meter, batches):
    results = []
    with meter.window() as box:
        started = time.perf_counter()
        for batch in batches:
            results += backend.generate(batch)
        wall_s = time.perf_counter() - started
    tokens = sum(r.output_tokens for r in results)
    return {
        "wall_s": round(wall_s, 3),
        "output_tokens": tokens,
        "input_tokens": sum(r.input_tokens for r in results),
        "tokens_per_s": round(tokens / wall_s, 2),
        "energy_j_per_output_token": round(box[0].energy_j / max(tokens, 1), 4),
        "energy_source": box[0].source,
    }, results


def prefill_cost_ratio(backend, requests) -> dict:
    """Seconds per prompt token vs seconds per generated token, at full batch."""
    one = [GenRequest(prompt=r.prompt, messages=r.messages, max_new_tokens=1) for r in requests]
    started = time.perf_counter()
    first = backend.generate(one)
    prefill_s = time.perf_counter() - started
    full = backend.generate(requests)
    decode_s = full[0].latency_s - prefill_s
    decode_steps = max(r.output_tokens for r in full) - 1
    per_prompt_token = prefill_s / max(sum(r.input_tokens for r in first), 1)
    per_generated_token = decode_s / max(decode_steps * len(requests), 1)
    return {
        "prefill_s": round(prefill_s, 3),
        "decode_s": round(decode_s, 3),
        "prefill_to_decode_cost_per_token": round(per_prompt_token / per_generated_token, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=Path("artifacts/models"))
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--torch-threads", type=int, default=None, help="default: torch's (one per core)")
    parser.add_argument("--tag", default="", help="write results/batching-<tag>.json instead of batching.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    meter = EstimateMeter()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    payload = {"conditions": conditions(), "batch_size": len(QUESTIONS), "max_new_tokens": args.max_new_tokens, "models": {}}
    print(f"{'model':<14} {'batch 1 tok/s':>13} {'batch 8 tok/s':>13} {'ratio':>6} {'J/tok b1':>9} {'J/tok b8':>9} (estimated)")
    for name in args.models:
        started = time.perf_counter()
        backend = TransformersBackend(str(args.models_dir / name), device="auto", torch_threads=args.torch_threads)
        load_s = time.perf_counter() - started
        chat = bool(getattr(backend.tokenizer, "chat_template", None))
        requests = make_requests(chat, args.max_new_tokens)
        backend.generate(requests[:2])  # warm-up, outside the timed windows
        single, single_out = timed(backend, meter, [[r] for r in requests])
        batched, batched_out = timed(backend, meter, [requests])
        same = sum(a.text == b.text for a, b in zip(single_out, batched_out))
        entry = {
            "load_s": round(load_s, 2),
            "prompting": "chat" if chat else "fewshot",
            "batch_1": single,
            "batch_8": batched,
            "speedup": round(batched["tokens_per_s"] / single["tokens_per_s"], 2),
            "same_text_batched_vs_single": f"{same}/{len(requests)}",
            "prefill": prefill_cost_ratio(backend, requests),
            "sample_answers": [r.text for r in batched_out[:3]],
        }
        payload["models"][name] = entry
        print(
            f"{name:<14} {single['tokens_per_s']:>13} {batched['tokens_per_s']:>13} {entry['speedup']:>6} "
            f"{single['energy_j_per_output_token']:>9} {batched['energy_j_per_output_token']:>9}"
        )
        backend.close()
    print("wrote", write_result(f"batching-{args.tag}" if args.tag else "batching", payload))


if __name__ == "__main__":
    main()
