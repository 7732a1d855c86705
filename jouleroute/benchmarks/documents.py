"""Turn raw benchmark rows into normalized documents, one function per source layout.

A document is a dict with the query-table fields (``query_id, task, subtask, question, choices,
gold, source_file, source_row``) plus ``rationale``: the worked solution when the source has one,
used only by chain-of-thought few-shot exemplars. Every function takes rows as
``(0-based row, raw dict)`` so the same code reads bundled files, full local copies and
Hugging Face datasets.
"""

from __future__ import annotations

import re
from collections import defaultdict
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterable

from jouleroute.benchmarks.reading import BenchmarkDataError, data_error, field, string_list

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
Rows = Iterable[tuple[int, dict]]


def render_options(stem: str, choices: list[str]) -> str:
    return stem + "\n" + "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(choices))


def make_doc(
    task: str,
    local_id: str,
    subtask: str,
    question: str,
    choices: list[str],
    gold: str,
    source: str,
    row: int,
    rationale: str | None = None,
) -> dict:
    return {
        "query_id": f"{task}/{local_id}",
        "task": task,
        "subtask": subtask,
        "question": question,
        "choices": list(choices),
        "gold": gold,
        "source_file": source,
        "source_row": row,
        "rationale": rationale,
    }


def _index_gold(raw: dict, name: str, n: int, source: str, row: int) -> str:
    index = field(raw, name, int, source, row)
    if not 0 <= index < n:
        raise data_error(source, row, name, f"index {index} is outside the {n} choices")
    return LETTERS[index]


def gsm8k_docs(rows: Rows, source: str, stem: str) -> list[dict]:
    docs = []
    for row, raw in rows:
        question = field(raw, "question", str, source, row)
        answer = field(raw, "answer", str, source, row)
        if "####" not in answer:
            raise data_error(source, row, "answer", "no final answer after '####'")
        reasoning, final = answer.rsplit("####", 1)
        gold = final.strip().replace(",", "")
        try:
            Decimal(gold)
        except InvalidOperation:
            raise data_error(source, row, "answer", f"final answer {final.strip()!r} is not a number") from None
        # <<48/2=24>> are calculator annotations: noise in a few-shot exemplar.
        rationale = re.sub(r"<<[^>]*>>", "", reasoning).strip()
        docs.append(make_doc("gsm8k", f"{stem}-{row:04d}", "", question, [], gold, source, row, rationale))
    return docs


def math500_docs(rows: Rows, source: str, stem: str) -> list[dict]:
    docs = []
    for row, raw in rows:
        problem = field(raw, "problem", str, source, row)
        answer = field(raw, "answer", str, source, row)
        unique_id = field(raw, "unique_id", str, source, row)  # e.g. test/algebra/1255.json
        local_id = unique_id.removesuffix(".json").replace("/", "-")
        solution = raw.get("solution") if isinstance(raw.get("solution"), str) else None
        docs.append(make_doc("math500", local_id, "", problem, [], answer, source, row, solution))
    return docs


def mmlu_docs(rows: Rows, source: str, stem: str) -> list[dict]:
    """Ids count rows within a subject, so a per-subject prefix of the file keeps its ids."""
    seen: dict[str, int] = defaultdict(int)
    docs = []
    for row, raw in rows:
        subject = field(raw, "subject", str, source, row)
        choices = string_list(raw, "choices", source, row)
        gold = _index_gold(raw, "answer", len(choices), source, row)
        question = render_options(field(raw, "question", str, source, row), choices)
        local_id = f"{stem}-{subject}-{seen[subject]:04d}"
        seen[subject] += 1
        docs.append(make_doc("mmlu", local_id, subject, question, choices, gold, source, row))
    return docs


def arc_docs(task: str):
    """ARC comes in two layouts: ``choices={text, label}, answerKey`` (HF / validation) and
    ``choices=[...], gold=<index>`` (the OLMo test reconstruction). Labels are re-lettered A.."""

    def to_docs(rows: Rows, source: str, stem: str) -> list[dict]:
        docs = []
        for row, raw in rows:
            arc_id = field(raw, "id", str, source, row)
            choices_raw = field(raw, "choices", (dict, list), source, row)
            if isinstance(choices_raw, dict):
                choices = string_list(choices_raw, "text", source, row)
                labels = [str(label) for label in field(choices_raw, "label", list, source, row)]
                key = str(field(raw, "answerKey", (str, int), source, row))
                if key not in labels or len(labels) != len(choices):
                    raise data_error(source, row, "answerKey", f"{key!r} is not one of the labels {labels}")
                gold = LETTERS[labels.index(key)]
            else:
                choices = string_list(raw, "choices", source, row)
                gold = _index_gold(raw, "gold", len(choices), source, row)
            question = render_options(field(raw, "question", str, source, row), choices)
            docs.append(make_doc(task, arc_id, "", question, choices, gold, source, row))
        return docs

    return to_docs


def _clean_hellaswag(text: str) -> str:
    # WikiHow contexts carry markup such as "[title]" and "[step]"; drop it as lm-eval does.
    text = text.strip().replace(" [title]", ". ")
    return re.sub(r"\[.*?\]", "", text).replace("  ", " ").strip()


def hellaswag_docs(rows: Rows, source: str, stem: str) -> list[dict]:
    docs = []
    for row, raw in rows:
        ctx = field(raw, "ctx_a", str, source, row) + " " + field(raw, "ctx_b", str, source, row).capitalize()
        context = _clean_hellaswag(field(raw, "activity_label", str, source, row) + ": " + ctx)
        endings = [_clean_hellaswag(e) for e in string_list(raw, "endings", source, row)]
        label = field(raw, "label", (str, int), source, row)
        if not str(label).isdigit():
            raise data_error(source, row, "label", f"expected an ending index, got {label!r}")
        gold = _index_gold({"label": int(label)}, "label", len(endings), source, row)
        question = render_options("Pick the most likely continuation.\n" + context, endings)
        docs.append(make_doc("hellaswag", f"{stem}-{row:04d}", "", question, endings, gold, source, row))
    return docs


_LETTERED = re.compile(r"^\(([A-Z])\)\s?(.*)$", re.MULTILINE)
_DASHED = re.compile(r"^- (.*)$", re.MULTILINE)


def bbh_options(text: str) -> list[str]:
    """Option texts listed after "Options:" as ``(A) x`` or ``- x`` lines; [] when there are none."""
    if "Options:" not in text:
        return []
    tail = text.split("Options:", 1)[1]
    lettered = _LETTERED.findall(tail)
    return [t.strip() for _, t in lettered] if lettered else [t.strip() for t in _DASHED.findall(tail)]


def bbh_docs(rows: Rows, source: str, stem: str) -> list[dict]:
    """``stem`` is the sub-task name (the file is ``<sub-task>.json``)."""
    docs = []
    for row, raw in rows:
        question = field(raw, "input", str, source, row)
        gold = field(raw, "target", str, source, row).strip()
        if not gold:
            raise data_error(source, row, "target", "empty")
        docs.append(make_doc("bbh", f"{stem}-{row:04d}", stem, question, bbh_options(question), gold, source, row))
    return docs


def bbh_cot_exemplars(path: Path, subtask: str) -> tuple[str, list[dict]]:
    """Parse a BBH ``cot-prompts/<sub-task>.txt`` into (task description, exemplars).

    The file is a canary line, ``-----``, a one-paragraph description, then blocks of
    ``Q: ...`` / ``A: Let's think step by step. ... So the answer is X.``
    """
    text = path.read_text(encoding="utf-8")
    body = text.split("-----\n", 1)[-1].strip()
    description, *blocks = body.split("\n\nQ: ")
    exemplars = []
    for index, block in enumerate(blocks):
        if "\nA: " not in block:
            raise BenchmarkDataError(f"{path.as_posix()}: exemplar {index} has no 'A: ' line")
        question, answer = block.split("\nA: ", 1)
        found = list(re.finditer(r"So the answer is (.+?)\.?\s*$", answer, re.DOTALL))
        if not found:
            raise BenchmarkDataError(f"{path.as_posix()}: exemplar {index} has no 'So the answer is'")
        rationale = answer[: found[-1].start()].removeprefix("Let's think step by step.").strip()
        gold = found[-1].group(1).strip()
        exemplars.append(
            make_doc("bbh", f"cot-{subtask}-{index}", subtask, question, bbh_options(question), gold,
                     path.as_posix(), index, rationale)
        )
    if not exemplars:
        raise BenchmarkDataError(f"{path.as_posix()}: no 'Q: ' exemplars found")
    return description.strip(), exemplars
