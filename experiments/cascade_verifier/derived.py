"""The verifier's profile: one row per (query, choice) with the columns router_data reads.

For a query answered by both the first and the final model:

- ``accept``: the first model's correctness and joules;
- ``escalate``: the final model's correctness and the joules of **both** calls (the first always runs).

The query text the verifier reads is the question, the tail of the first model's output text (``work_chars``
characters, where the profile records it) and its answer as the cascade reads it (``cascade.matrix.read_answer``),
in that order, so the router's head-and-tail token cut keeps the question's opening and the work's end with the
answer. The verifier's own joules are not in this profile: they are the same for both choices (it reads every
query), so they change no label; the comparison adds them (``compare``).
"""

from __future__ import annotations

import pandas as pd

from jouleroute.cascade.matrix import read_answer

from experiments.cascade_verifier.config import ACCEPT, ESCALATE

NO_ANSWER = "(none extracted)"


def verifier_text(question: str, answer: str | None, work: str | None, work_chars: int) -> str:
    """What the verifier reads for one query (module doc)."""
    parts = [f"Question: {question.strip()}"]
    if work_chars > 0 and isinstance(work, str) and work.strip():
        parts.append(f"End of the model's work: {work.strip()[-work_chars:]}")
    parts.append(f"The model's answer: {answer.strip() if answer and answer.strip() else NO_ANSWER}")
    return "\n\n".join(parts)


def _pairs(profile: pd.DataFrame, first: str, final: str) -> pd.DataFrame:
    """One row per query both models answered: the first's and the final's fields side by side."""
    one = profile[profile["candidate_id"] == first].set_index("query_id")
    two = profile[profile["candidate_id"] == final].set_index("query_id")
    if one.empty or two.empty:
        raise ValueError(f"the profile has no row of {first if one.empty else final!r}; candidates: "
                         f"{sorted(profile['candidate_id'].unique())}")
    both = one.merge(two, left_index=True, right_index=True, suffixes=("_first", "_final"))
    clash = both[both["energy_source_first"] != both["energy_source_final"]]
    if len(clash):
        q = clash.index[0]
        raise ValueError(f"query {q}: {first} is {clash.loc[q, 'energy_source_first']!r} joules and {final} "
                         f"{clash.loc[q, 'energy_source_final']!r}; summing them would mix energy sources")
    return both


def derived_tables(profile: pd.DataFrame, queries: pd.DataFrame, first: str, final: str,
                   work_chars: int = 300, energy_column: str = "energy_j") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profile, queries) of the two-choice pool, every split kept (router_data drops test itself)."""
    both = _pairs(profile, first, final)
    known = queries.drop_duplicates("query_id").set_index("query_id")
    both = both[both.index.isin(known.index)].sort_index()
    rows, texts = [], []
    for qid, r in both.iterrows():
        task, split = str(r["task_first"]), str(r["split_first"])
        base = {"query_id": qid, "task": task, "split": split, "energy_source": r["energy_source_first"]}
        e1, e2 = float(r[f"{energy_column}_first"]), float(r[f"{energy_column}_final"])
        rows.append({**base, "candidate_id": ACCEPT, "correct": float(r["correct_first"]), energy_column: e1})
        rows.append({**base, "candidate_id": ESCALATE, "correct": float(r["correct_final"]), energy_column: e1 + e2})
        answer = read_answer(task, r.get("extracted_answer_first"), r.get("output_text_first"))
        texts.append({"query_id": qid, "task": task, "split": split,
                      "question": verifier_text(str(known.loc[qid, "question"]), answer,
                                                r.get("output_text_first"), work_chars)})
    return pd.DataFrame(rows), pd.DataFrame(texts)
