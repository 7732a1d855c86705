"""Typed parameters of the ``prepare`` stage (the ``prepare`` section of params.yaml)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from jouleroute.benchmarks.registry import TASK_NAMES, TASKS
from jouleroute.strict import StrictModel

# Small enough to profile every candidate on 2 CPU cores; bbh 27 covers each sub-task once.
DEFAULT_SAMPLES = {
    "gsm8k": 10,
    "math500": 10,
    "mmlu": 10,
    "arc_challenge": 10,
    "arc_easy": 10,
    "hellaswag": 10,
    "bbh": 27,
}


def _check_task_keys(mapping: dict, where: str) -> dict:
    unknown = [key for key in mapping if key not in TASK_NAMES]
    if unknown:
        raise ValueError(f"unknown task {unknown[0]!r} in prepare.{where}; valid tasks: {', '.join(TASK_NAMES)}")
    return mapping


class SplitFractions(StrictModel):
    """Share of each task's queries in each split. They must sum to 1."""

    train: float = Field(default=0.6, ge=0.0, le=1.0)
    val: float = Field(default=0.2, ge=0.0, le=1.0)
    test: float = Field(default=0.2, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sums_to_one(self) -> "SplitFractions":
        total = self.train + self.val + self.test
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"split fractions must sum to 1, got {total:g}")
        return self


class PromptsConfig(StrictModel):
    """How a file of a user's prompts becomes a query table (``labels.queries.import_prompts``)."""

    task: str = Field(default="user", min_length=1)  # a request's task when it names none (body or metadata "task")
    prompt_column: str = "prompt"  # parquet: the column holding each prompt
    timestamp_column: str = "timestamp"  # parquet: when present, rows carry a time and the split follows it
    split: SplitFractions = SplitFractions()  # shares of train (oldest), val and test (newest)
    seed: int = 0  # the seeded split, for rows without a time


class PromptsFileConfig(PromptsConfig):
    """``prepare.prompts``: a user's prompts file (relative to the repository root) and how it is read."""

    file: str = Field(min_length=1)  # an OpenAI chat-completions JSONL (.jsonl) or a parquet with a prompt column


class PrepareConfig(StrictModel):
    """Which queries to sample from which benchmark files, and how to split them.

    ``source``: ``bundled`` reads the subsets in the data root (``paths.data_dir``, docs/data.md); ``local`` reads full
    copies with the same layout from ``local_dir``; ``hf`` downloads from the Hugging Face Hub
    (needs network, and JOULEROUTE_ONLINE=1) using the dataset ids in ``hf``; ``prompts`` reads a user's own
    prompts, without gold answers, from ``prompts.file`` (``samples``, ``split`` and ``seed`` are then unused:
    every prompt is a query, split by ``prompts.split``).
    """

    seed: int = 0
    samples: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_SAMPLES))
    split: SplitFractions = Field(default_factory=SplitFractions)
    source: Literal["bundled", "local", "hf", "prompts"] = "bundled"
    local_dir: str | None = None
    prompts: PromptsFileConfig | None = None  # with source: prompts
    hf: dict[str, str] = Field(default_factory=lambda: {name: TASKS[name].hf.dataset_id for name in TASK_NAMES})

    @field_validator("samples")
    @classmethod
    def _known_tasks_positive(cls, samples: dict[str, int]) -> dict[str, int]:
        _check_task_keys(samples, "samples")
        if not samples:
            raise ValueError("prepare.samples is empty: name at least one task")
        for name, n in samples.items():
            if n < 1:
                raise ValueError(f"prepare.samples.{name} must be >= 1, got {n} (leave the task out instead)")
        return samples

    @field_validator("hf")
    @classmethod
    def _known_hf_tasks(cls, hf: dict[str, str]) -> dict[str, str]:
        return _check_task_keys(hf, "hf")

    @model_validator(mode="after")
    def _local_needs_dir(self) -> "PrepareConfig":
        if self.source == "local" and not self.local_dir:
            raise ValueError("prepare.source 'local' needs prepare.local_dir (a folder with <task>/<files>)")
        return self

    @model_validator(mode="after")
    def _prompts_named_iff_used(self) -> "PrepareConfig":
        if self.source == "prompts" and self.prompts is None:
            raise ValueError("prepare.source 'prompts' needs prepare.prompts.file (a chat-completions JSONL or a "
                             "parquet with a prompt column)")
        if self.source != "prompts" and self.prompts is not None:
            raise ValueError(f"prepare.prompts is set but prepare.source is {self.source!r}: set source: prompts "
                             "or drop the prompts section")
        return self
