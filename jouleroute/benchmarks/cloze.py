"""Multiple-choice questions as log-likelihood requests (the lm-evaluation-harness cloze convention).

The model never writes an answer: each choice's text is scored as the continuation of
``Question: <stem>\\nAnswer:`` (HellaSwag: of the context itself), and the best
length-normalised log-likelihood wins. So the answer can never be invalid, and the cost is a
forward pass with no decoding.

Which rows are multiple choice: every MMLU, ARC and HellaSwag row, and the BBH sub-tasks whose
answer is one of listed options ``(A)..`` or a fixed label pair (True/False, Yes/No,
valid/invalid). The rest (GSM8K, MATH-500, free-form BBH) keep generation.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from jouleroute.backends.base import LoglikRequest
from jouleroute.benchmarks.documents import LETTERS, render_options

HELLASWAG_LEAD = "Pick the most likely continuation.\n"
_BBH_LABEL_PAIRS = {"True or False": ("True", "False"), "Yes or No": ("Yes", "No"),
                    "valid or invalid": ("valid", "invalid"), "yes or no": ("yes", "no")}


def strip_options(question: str, choices: Sequence[str]) -> str:
    """The stem of a question rendered with its lettered options (``documents.render_options``)."""
    rendered = render_options("", list(choices))
    return question[: -len(rendered)] if choices and question.endswith(rendered) else question


def choice_frame(task: str, subtask: str, hint: str, question: str, choices: Sequence[str]):
    """``(stem, choice texts, labels)`` for a multiple-choice row, or None for a free-form one."""
    # options to score; a prompt without them (a user's own, captured) is generated like any open prompt
    if task in ("mmlu", "arc_challenge", "arc_easy", "hellaswag") and len(choices) >= 2:
        stem = strip_options(question, choices)
        if task == "hellaswag":
            stem = stem.removeprefix(HELLASWAG_LEAD)
        return stem, list(choices), [LETTERS[i] for i in range(len(choices))]
    if task == "bbh" and hint == "(<letter>)" and choices:
        return question, list(choices), [f"({LETTERS[i]})" for i in range(len(choices))]
    if task == "bbh" and hint in _BBH_LABEL_PAIRS:
        pair = _BBH_LABEL_PAIRS[hint]
        return question, list(pair), list(pair)
    return None


def gold_text(frame_choices: Sequence[str], labels: Sequence[str], gold: str) -> str:
    """The choice text a solved exemplar shows (its gold label mapped to the option's text)."""
    by_label = {label.casefold(): text for label, text in zip(labels, frame_choices)}
    return by_label.get(gold.strip().casefold(), gold)


def render(task: str, stem: str, answer: str | None) -> str:
    """One cloze block: HellaSwag continues its context; other tasks answer a question."""
    if task == "hellaswag":
        return stem if answer is None else f"{stem} {answer}"
    return f"Question: {stem}\nAnswer:" + ("" if answer is None else f" {answer}")


def loglik_request(task, row: Mapping, exemplars: Sequence[dict], header: str = "") -> LoglikRequest | None:
    """The request for ``row`` of ``task`` (a ``tasks.Task``), or None when the row is free-form."""
    hint = task.hint(row["subtask"])
    frame = choice_frame(task.name, row["subtask"], hint, row["question"], json.loads(row["choices_json"]))
    if frame is None:
        return None
    stem, choice_texts, labels = frame
    blocks = []
    for ex in exemplars:
        ex_stem, ex_choices, ex_labels = choice_frame(task.name, ex["subtask"], hint, ex["question"], ex["choices"])
        blocks.append(render(task.name, ex_stem, gold_text(ex_choices, ex_labels, ex["gold"])))
    blocks.append(render(task.name, stem, None))
    context = (f"{header}\n\n" if header else "") + "\n\n".join(blocks)
    return LoglikRequest(context, tuple(f" {text}" for text in choice_texts), tuple(labels))
