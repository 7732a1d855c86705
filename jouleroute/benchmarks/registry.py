"""The task registry: each benchmark declared as data (files, reader, exemplars, answer kind).

``get_task(name)`` returns a :class:`Task` whose methods load documents, build prompts and grade
outputs. Few-shot exemplars always come from a held-out source (GSM8K train, MMLU dev, ARC
validation, BBH cot-prompts, or query rows reserved for the purpose), never from the queries.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Mapping, Sequence

from jouleroute.backends.base import LoglikRequest
from jouleroute.benchmarks import cloze, grading, prompts
from jouleroute.benchmarks import documents as docs
from jouleroute.benchmarks.reading import BenchmarkDataError, read_bbh_json, read_jsonl

# Stages run from the repository root; the benchmark files lie in the data root (paths.data_dir).
DEFAULT_DATA_DIR = Path("data/external/benchmarks")
DEFAULT_FEWSHOT_K = 3
TASK_NAMES = ("gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh")

# The 27 BBH sub-tasks and the answer form each one's target takes.
_BBH_LETTER = "(<letter>)"
BBH_ANSWER_HINTS: Mapping[str, str] = {
    "boolean_expressions": "True or False",
    "causal_judgement": "Yes or No",
    "date_understanding": _BBH_LETTER,
    "disambiguation_qa": _BBH_LETTER,
    "dyck_languages": "<the closing brackets, separated by spaces>",
    "formal_fallacies": "valid or invalid",
    "geometric_shapes": _BBH_LETTER,
    "hyperbaton": _BBH_LETTER,
    "logical_deduction_five_objects": _BBH_LETTER,
    "logical_deduction_seven_objects": _BBH_LETTER,
    "logical_deduction_three_objects": _BBH_LETTER,
    "movie_recommendation": _BBH_LETTER,
    "multistep_arithmetic_two": "<number>",
    "navigate": "Yes or No",
    "object_counting": "<number>",
    "penguins_in_a_table": _BBH_LETTER,
    "reasoning_about_colored_objects": _BBH_LETTER,
    "ruin_names": _BBH_LETTER,
    "salient_translation_error_detection": _BBH_LETTER,
    "snarks": _BBH_LETTER,
    "sports_understanding": "yes or no",
    "temporal_sequences": _BBH_LETTER,
    "tracking_shuffled_objects_five_objects": _BBH_LETTER,
    "tracking_shuffled_objects_seven_objects": _BBH_LETTER,
    "tracking_shuffled_objects_three_objects": _BBH_LETTER,
    "web_of_lies": "Yes or No",
    "word_sorting": "<the words in sorted order, separated by spaces>",
}
BBH_SUBTASKS = tuple(BBH_ANSWER_HINTS)

AnswerKind = Literal["number", "math", "choice", "bbh"]
ToDocs = Callable[[Sequence[tuple[int, dict]], str, str], list[dict]]


@dataclass(frozen=True)
class HFSpec:
    """Where the task lives on the Hugging Face Hub (used only with ``source: hf``)."""

    dataset_id: str
    configs: tuple[str | None, ...]  # BBH: one config per sub-task
    split: str


@dataclass(frozen=True)
class Task:
    """One benchmark: its files and reader (data), plus the methods every stage calls.

    ``load`` feeds ``prepare``; ``chat_messages`` / ``fewshot_prompt`` / ``stop_sequences`` build
    what the tournament sends; ``grade`` / ``grade_row`` score what comes back.
    """

    name: str
    answer_kind: AnswerKind
    answer_hint: str  # what "X" in "Answer: X" should look like (BBH: per sub-task)
    query_files: tuple[str, ...]  # under <data_dir>/<name>/
    to_docs: ToDocs
    exemplar_file: str | None  # under <data_dir>/<name>/; None: reserved rows or BBH cot-prompts
    hf: HFSpec
    reserved_ids: tuple[str, ...] = ()  # query rows held back as few-shot exemplars
    fewshot_header: str = ""  # "{subject}" is filled in from the row's subtask
    fewshot_by_subtask: bool = False  # exemplars must share the query's subtask (MMLU subject, BBH)
    read_rows: Callable[[Path], list[tuple[int, dict]]] = read_jsonl

    # --- documents --------------------------------------------------------------------------
    def load(self, data_dir: Path) -> list[dict]:
        """Normalized query documents from ``<data_dir>/<name>/``, reserved exemplars excluded."""
        found: list[dict] = []
        for file in self.query_files:
            path = Path(data_dir) / self.name / file
            if not path.is_file():
                wanted = list(self.query_files)
                raise BenchmarkDataError(f"{path.as_posix()}: missing; task '{self.name}' reads {wanted}")
            found += self.to_docs(self.read_rows(path), path.as_posix(), path.stem)
        return self.drop_reserved(found)

    def drop_reserved(self, found: list[dict]) -> list[dict]:
        reserved = set(self.reserved_ids)
        kept = [d for d in found if d["query_id"] not in reserved]
        ids = [d["query_id"] for d in kept]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise BenchmarkDataError(f"task '{self.name}': query id '{dup}' occurs more than once")
        return kept

    def exemplars(self, subtask: str = "", data_dir: Path = DEFAULT_DATA_DIR) -> list[dict]:
        """Solved few-shot exemplars for a query of this (sub)task, in a fixed order."""
        pool = _exemplar_pool(self.name, str(data_dir))
        return [d for d in pool if d["subtask"] == subtask] if self.fewshot_by_subtask else list(pool)

    # --- prompts ----------------------------------------------------------------------------
    def hint(self, subtask: str = "") -> str:
        return BBH_ANSWER_HINTS.get(subtask, self.answer_hint) if self.name == "bbh" else self.answer_hint

    def chat_messages(self, row: Mapping, answer_style: str) -> list[dict[str, str]]:
        """Zero-shot chat prompt for an instruct model; ``row`` is a query-table row."""
        return prompts.chat_messages(row["question"], answer_style, self.hint(row["subtask"]))

    def fewshot_prompt(
        self, row: Mapping, answer_style: str, k: int = DEFAULT_FEWSHOT_K, data_dir: Path = DEFAULT_DATA_DIR
    ) -> str:
        """Few-shot completion prompt for a base model: the first ``k`` held-out exemplars."""
        pool = self.exemplars(row["subtask"], data_dir)
        if k > len(pool):
            where = f"{self.name}/{row['subtask']}" if row["subtask"] else self.name
            raise ValueError(f"few-shot k={k} but '{where}' has only {len(pool)} exemplars")
        chosen = pool[:k]
        header = chosen[0].get("header", "") if chosen else ""
        return prompts.fewshot_prompt(row["question"], chosen, answer_style, self.show_gold, header)

    def loglik_request(self, row: Mapping, k: int = 0, data_dir: Path = DEFAULT_DATA_DIR) -> LoglikRequest | None:
        """Log-likelihood request for a multiple-choice row (``k`` cloze exemplars); None if free-form."""
        pool = self.exemplars(row["subtask"], data_dir) if (k or self.fewshot_header or self.name == "bbh") else []
        if k > len(pool):
            raise ValueError(f"few-shot k={k} but '{self.name}/{row['subtask']}' has only {len(pool)} exemplars")
        header = pool[0].get("header", "") if pool else ""
        return cloze.loglik_request(self, row, pool[:k], header)

    def show_gold(self, gold: str) -> str:
        return f"${gold}$" if self.answer_kind == "math" else gold

    def stop_sequences(self, answer_style: str = "cot") -> tuple[str, ...]:
        return prompts.stop_sequences(answer_style)

    # --- grading ----------------------------------------------------------------------------
    def grade(self, output_text: str, gold: str, choices: Sequence[str] = ()) -> grading.Grade:
        """Grade one output. ``choices`` (option texts) lets an answer given as text match."""
        if self.answer_kind == "number":
            return grading.grade_number(output_text, gold)
        if self.answer_kind == "math":
            return grading.grade_math(output_text, gold)
        if self.answer_kind == "choice":
            return grading.grade_choice(output_text, gold, choices)
        return grading.grade_bbh(output_text, gold, choices)

    def grade_row(self, output_text: str, row: Mapping) -> grading.Grade:
        """Grade against a query-table row (gold and ``choices_json``). A row without gold (a user's prompt of
        this task) is read as the grader reads it, ungraded: ``correct`` None."""
        choices = json.loads(row["choices_json"])
        if not isinstance(row["gold"], str):  # None, or NaN as pandas reads a null string
            return grading.ungraded(self.grade(output_text, self.gold_shape(row["subtask"]), choices))
        return self.grade(output_text, row["gold"], choices)

    def gold_shape(self, subtask: str = "") -> str:
        """A stand-in gold answer of the shape this (sub)task's gold takes: BBH's grader picks how it reads an
        output by the gold's shape, so an ungraded row is read the way a graded one would be."""
        if self.answer_kind == "choice":
            return "A"
        if self.answer_kind != "bbh":
            return "0"
        hint = self.hint(subtask)
        if " or " in hint:  # a label pair: "True or False", "Yes or No", "valid or invalid"
            return hint.split(" or ")[0]
        return {_BBH_LETTER: "(A)", "<number>": "0"}.get(hint, ")" if "bracket" in hint else "words")


# --- exemplar pools ------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _exemplar_pool(name: str, data_dir: str) -> tuple[dict, ...]:
    task, task_dir = get_task(name), Path(data_dir) / name
    if name == "bbh":
        pool = []
        for subtask in BBH_SUBTASKS:
            description, found = docs.bbh_cot_exemplars(task_dir / "cot-prompts" / f"{subtask}.txt", subtask)
            pool += [{**d, "header": description.split("\n")[0]} for d in found]
        return tuple(pool)
    if task.exemplar_file is None:  # reserved query rows, in the order they are declared
        by_id = {}
        for file in task.query_files:
            path = task_dir / file
            by_id.update({d["query_id"]: d for d in task.to_docs(task.read_rows(path), path.as_posix(), path.stem)})
        missing = [i for i in task.reserved_ids if i not in by_id]
        if missing:
            raise BenchmarkDataError(f"{task_dir.as_posix()}: reserved few-shot rows {missing} not found")
        return tuple(by_id[i] for i in task.reserved_ids)
    path = task_dir / task.exemplar_file
    found = task.to_docs(task.read_rows(path), path.as_posix(), path.stem)
    if task.fewshot_header:
        found = [{**d, "header": task.fewshot_header.format(subject=d["subtask"].replace("_", " "))} for d in found]
    return tuple(found)


_LETTER_HINT = "<letter>"
TASKS: Mapping[str, Task] = {
    "gsm8k": Task("gsm8k", "number", "<number>", ("test.jsonl",), docs.gsm8k_docs, "train.jsonl",
                  HFSpec("openai/gsm8k", ("main",), "test")),
    "math500": Task("math500", "math", "$<answer>$", ("test.jsonl",), docs.math500_docs, None,
                    HFSpec("HuggingFaceH4/MATH-500", (None,), "test"),
                    # Four short solved problems with varied answer forms, kept out of the queries.
                    reserved_ids=("math500/test-algebra-1255", "math500/test-prealgebra-1924",
                                  "math500/test-precalculus-43", "math500/test-prealgebra-1834")),
    "mmlu": Task("mmlu", "choice", _LETTER_HINT, ("test.jsonl",), docs.mmlu_docs, "dev.jsonl",
                 HFSpec("cais/mmlu", ("all",), "test"),
                 fewshot_header="The following are multiple choice questions (with answers) about {subject}.",
                 fewshot_by_subtask=True),
    "arc_challenge": Task("arc_challenge", "choice", _LETTER_HINT, ("test.jsonl",), docs.arc_docs("arc_challenge"),
                          "validation.jsonl", HFSpec("allenai/ai2_arc", ("ARC-Challenge",), "test")),
    "arc_easy": Task("arc_easy", "choice", _LETTER_HINT, ("test.jsonl",), docs.arc_docs("arc_easy"),
                     "validation.jsonl", HFSpec("allenai/ai2_arc", ("ARC-Easy",), "test")),
    "hellaswag": Task("hellaswag", "choice", _LETTER_HINT, ("validation.jsonl",), docs.hellaswag_docs, None,
                      HFSpec("Rowan/hellaswag", (None,), "validation"),
                      reserved_ids=tuple(f"hellaswag/validation-{i:04d}" for i in range(5))),
    "bbh": Task("bbh", "bbh", "", tuple(f"{s}.json" for s in BBH_SUBTASKS), docs.bbh_docs, None,
                HFSpec("lukaemon/bbh", BBH_SUBTASKS, "test"), read_rows=read_bbh_json, fewshot_by_subtask=True),
}


class UnknownTaskError(KeyError):
    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r}; valid tasks: {', '.join(TASK_NAMES)}") from None
