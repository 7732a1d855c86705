"""Benchmark tasks (registry, prompts, grading) and the ``prepare`` stage.

``get_task(name)`` gives a :class:`Task` that loads documents, builds zero-shot chat and few-shot
completion prompts, and grades outputs; ``run_prepare`` samples and splits the query table.
``task_free.extract_answer`` reads an answer where no task's grader applies (a user's own prompts, the gateway).
"""

from jouleroute.benchmarks.config import PrepareConfig, SplitFractions
from jouleroute.benchmarks.grading import Grade
from jouleroute.benchmarks.prepare import run_prepare
from jouleroute.benchmarks.reading import BenchmarkDataError
from jouleroute.benchmarks.registry import (
    BBH_SUBTASKS,
    DEFAULT_DATA_DIR,
    DEFAULT_FEWSHOT_K,
    TASK_NAMES,
    Task,
    UnknownTaskError,
    get_task,
)

__all__ = [
    "BBH_SUBTASKS",
    "BenchmarkDataError",
    "DEFAULT_DATA_DIR",
    "DEFAULT_FEWSHOT_K",
    "Grade",
    "PrepareConfig",
    "SplitFractions",
    "TASK_NAMES",
    "Task",
    "UnknownTaskError",
    "get_task",
    "run_prepare",
]
