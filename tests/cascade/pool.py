"""Synthetic pools for the cascade tests: candidates whose answers agree exactly when they are right.

Every candidate answers every query of GSM8K-like tasks; a right answer is the gold number, a wrong one a number
that candidate alone gives (so two wrong answers never agree), unless ``wrong_agree`` makes wrong answers collide.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# name -> (accuracy, J/query): two cheap candidates, a middle one and the best (dearest)
POOL = {"cheap_a": (0.6, 1.0), "cheap_b": (0.6, 1.5), "mid": (0.75, 6.0), "best": (0.9, 20.0)}


def synthetic_pool(n: int = 400, pool: dict[str, tuple[float, float]] | None = None, seed: int = 0,
                   wrong_agree: float = 0.0, test_share: float = 0.25) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profile, queries): ``n`` queries split train/val/test, every candidate answering each."""
    pool = POOL if pool is None else pool
    rng = np.random.default_rng(seed)
    qids = [f"gsm8k/{i:04d}" for i in range(n)]
    u = rng.random(n)
    splits = np.where(u < test_share, "test", np.where(u < test_share + 0.15, "val", "train"))
    gold = rng.integers(10, 1000, n)
    rows = []
    for c, (name, (acc, joules)) in enumerate(pool.items()):
        right = rng.random(n) < acc
        collide = rng.random(n) < wrong_agree
        tokens = rng.integers(50, 400, n)
        for i, q in enumerate(qids):
            wrong = gold[i] + 1 if collide[i] else gold[i] + 1000 * (c + 1)
            answer = str(gold[i]) if right[i] else str(wrong)
            energy = joules * (0.5 + rng.random())
            rows.append({"query_id": q, "candidate_id": name, "task": "gsm8k", "split": splits[i],
                         "correct": int(right[i]), "invalid": 0, "extracted_answer": answer,
                         "output_text": f"... so the answer is {answer}", "output_tokens": int(tokens[i]),
                         "latency_s": 0.01 * energy, "energy_j": energy, "energy_net_j": 0.8 * energy,
                         "energy_source": "modelled"})
    queries = pd.DataFrame({"query_id": qids, "task": "gsm8k", "split": splits, "gold": gold.astype(str)})
    return pd.DataFrame(rows), queries
