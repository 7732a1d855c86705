"""What the loop's gate scores (loop/score.py): a deployed cascade has no one pick, so its chain is simulated on
the iteration's labelled profile, as the evaluate stage simulates it; by construction here, the chain
small+mid > big stops where small and mid agree and asks big elsewhere."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jouleroute.loop.score import PolicyPicks, paired

CHAIN = {"kind": "cascade", "name": "small+mid > big", "stages": [["small", "mid"], ["big"]], "max_output_tokens": None}
JOULES = {"small": 1.0, "mid": 2.0, "big": 10.0}


def _labelled(n: int = 40) -> pd.DataFrame:
    """GSM8K-like queries: big answers 7 and is right everywhere; small and mid answer 7 on even queries (agreeing
    and right) and 3 and 5 on odd ones (disagreeing, both wrong). Query 0 is unlabelled for mid."""
    rows = []
    for i in range(n):
        for c in JOULES:
            answer = "7" if c == "big" or i % 2 == 0 else {"small": "3", "mid": "5"}[c]
            rows.append({"query_id": f"q{i:03d}", "candidate_id": c, "task": "gsm8k", "split": "test",
                         "correct": float(answer == "7"), "extracted_answer": answer, "output_text": answer,
                         "output_tokens": 4, "latency_s": 0.1, "energy_j": JOULES[c], "energy_source": "estimated",
                         "label_source": "reference:big"})
    frame = pd.DataFrame(rows)
    frame.loc[(frame["query_id"] == "q000") & (frame["candidate_id"] == "mid"), ["correct", "label_source"]] = None
    return frame


def test_a_deployed_cascade_is_simulated_on_the_labelled_profile_and_compared_with_the_served_single():
    profile = _labelled()
    ids = sorted(profile["query_id"].unique())
    cascade = PolicyPicks("cascade:aaa", "cascade", None, CHAIN)
    single = PolicyPicks("single:bbb", "single", ["big"] * len(ids))
    out = paired(cascade, single, ids, profile, "energy_j")
    assert out["n_test"] == 40 and out["n_unlabelled"] == 1  # q000: one candidate unlabelled, left out for both
    assert np.all(out["candidate_correct"] == 1) and np.all(out["serving_correct"] == 1)
    even = np.array([int(q[1:]) % 2 == 0 for q in ids[1:]])
    assert np.allclose(out["candidate_energy"], np.where(even, 3.0, 13.0))  # stopped at small+mid, else big too
    assert np.allclose(out["serving_energy"], 10.0)
    assert out["candidate_picks"] == {"cascade small+mid > big": 40} and out["serving_picks"] == {"big": 40}
