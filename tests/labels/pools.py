"""Tiny profiles with known answers, for the label tests: GSM8K-style numbers, graded against a gold answer."""

from __future__ import annotations

import pandas as pd


def profile(answers: dict[str, list[object]], gold: list[int], task: str = "gsm8k",
            split: str = "train") -> pd.DataFrame:
    """One row per (query, candidate): ``answers[candidate][q]`` is its extracted answer (None: no answer),
    ``correct`` is graded against ``gold[q]``, as the tournament would."""
    rows = []
    for q, truth in enumerate(gold):
        for candidate, given in answers.items():
            answer = given[q]
            rows.append({"query_id": f"{task}/q{q:03d}", "candidate_id": candidate, "task": task, "split": split,
                         "correct": int(answer is not None and str(answer) == str(truth)),
                         "extracted_answer": None if answer is None else str(answer),
                         "output_text": None if answer is None else f"The answer is {answer}."})
    return pd.DataFrame(rows)
