"""LM-router speed: one-pass label scoring vs the previous generate()-based router, in one run.

Both paths route the same queries with the same model (SmolLM2-135M-Instruct from the
`models` stage) and the same torch threads:

* generate: the router as it was before this change, reproduced here: its prompt (a system
  message listing every candidate id, the question cut to 200 characters head + tail, then
  "Energy weight: λ") and trie-constrained greedy decoding of the candidate id; a λ sweep
  re-ran it for every λ;
* scoring: this router's prompt (the task's shared scaffold stripped, a token budget) and
  one forward pass per query, label-token logits, λ decided outside the model.

Ratios: routings per second (scoring / generate) and the cost of a 7-point λ sweep relative
to one scoring pass. Uses the replay study's test questions when they exist, else the
embedded default's.

    .venv/bin/python benchmarks/bench_router_scoring.py [--queries 48] [--threads 1]

Writes benchmarks/results/router_scoring.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from _common import conditions, write_result

from jouleroute.routing.lm_config import RouterConfig
from jouleroute.routing.lm_decoding import CandidateTrie, candidate_token_ids, constrained_choices
from jouleroute.routing.lm_router import LMRouter
from jouleroute.routing.lm_spec import RouterSpec

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "artifacts/models/smollm2-135m"
LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def test_queries(n: int) -> pd.DataFrame:
    for path in (ROOT / "artifacts/replay/queries.parquet", ROOT / "artifacts/prepare/queries.parquet"):
        if path.exists():
            frame = pd.read_parquet(path)
            return frame[frame["split"] == "test"].sample(n=n, random_state=0).reset_index(drop=True)
    raise SystemExit("no query table: run `make study` (replay) or `dvc repro prepare` first")


def old_prompt(candidates: list[str], question: str, lam: float) -> list[dict[str, str]]:
    """The previous router's prompt (main before this change), for a like-for-like timing."""
    text = question.strip()
    if len(text) > 200:
        text = text[:100].rstrip() + " [...] " + text[len(text) - 100:].lstrip()
    system = ("Pick the model that answers the query correctly with the least energy; a higher energy "
              f"weight favours cheaper models. Reply with one model id: {', '.join(candidates)}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Query: {text}\nEnergy weight: {lam:g}"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec_path = ROOT / "artifacts/replay/router_data"
    queries = test_queries(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "router"
        import shutil

        shutil.copytree(MODEL, folder)
        if (spec_path / "router_spec.json").exists():
            shutil.copy(spec_path / "router_spec.json", folder)
        else:
            raise SystemExit("needs artifacts/replay/router_data/router_spec.json: run `make study` first")
        router = LMRouter(folder, cfg=RouterConfig(batch_size=16, threads=args.threads))
        spec: RouterSpec = router.spec
        messages = [old_prompt(spec.candidates, q, 0.5) for q in queries["question"]]
        trie = CandidateTrie(candidate_token_ids(router.tokenizer, spec.candidates))
        started = time.perf_counter()
        for start in range(0, len(messages), 16):
            constrained_choices(router.model, router.tokenizer, messages[start:start + 16], trie)
        generate_s = time.perf_counter() - started
        started = time.perf_counter()
        router.score(queries)
        score_s = time.perf_counter() - started
        started = time.perf_counter()
        router._last = None  # force a fresh pass: the sweep pays one scoring pass plus 7 decisions
        for lam in LAMBDAS:
            router.route(queries, lam=lam)
        sweep_s = time.perf_counter() - started
    n = len(queries)
    payload = {
        "conditions": conditions(),
        "queries": n,
        "generate_routings_per_s": n / generate_s,
        "scoring_routings_per_s": n / score_s,
        "speedup_scoring_vs_generate": generate_s / score_s,
        "sweep_7_lambdas_over_one_pass": sweep_s / score_s,
        "generate_sweep_7_lambdas_over_scoring_sweep": 7 * generate_s / sweep_s,
        "targets": {"speedup_scoring_vs_generate": ">= 10", "sweep_7_lambdas_over_one_pass": "<= 2"},
    }
    print(write_result("router_scoring", payload))
    for key in ("generate_routings_per_s", "scoring_routings_per_s", "speedup_scoring_vs_generate",
                "sweep_7_lambdas_over_one_pass"):
        print(f"{key}: {payload[key]:.3f}")


if __name__ == "__main__":
    main()
