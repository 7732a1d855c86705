"""Open prompts: queries whose task is not in the benchmark registry (a user's own prompts, task ``user``).

No task declares how to ask or grade them, so every candidate is asked the same way: the question alone as one
user message (a chat candidate's template, as for its other prompts) or, for a few-shot candidate, as a
zero-shot ``Question: ...`` / ``Answer:`` completion. No exemplars and no answer instruction; the candidate's
answer style does not apply (a log-likelihood candidate has no choices to score: it generates, and the tournament
says so). Its own ``max_new_tokens`` bounds the answer. What the answer says is read by the task-free extractor
(``benchmarks.task_free``): ``invalid`` when it reads nothing. An open prompt has no gold, so it is never graded.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from jouleroute.backends import GenRequest
from jouleroute.benchmarks.grading import Grade
from jouleroute.benchmarks.registry import TASKS
from jouleroute.benchmarks.task_free import extract_answer
from jouleroute.pool import CandidateSpec

logger = logging.getLogger(__name__)

# A base model's completion ends where it starts inventing the next question (blank lines may be part of the answer).
COMPLETION_STOP = ("\nQuestion:",)


def is_open_prompt(task: str) -> bool:
    """Whether a query of ``task`` is an open prompt (no registered task asks and grades it)."""
    return task not in TASKS


def open_request(row: Mapping, candidate: CandidateSpec) -> GenRequest:
    """The generation request of an open prompt (module doc)."""
    if candidate.prompt_style == "chat":
        return GenRequest(prompt=None, messages=[{"role": "user", "content": row["question"]}],
                          max_new_tokens=candidate.max_new_tokens, stop=[])
    return GenRequest(prompt=f"Question: {row['question']}\nAnswer:", messages=None,
                      max_new_tokens=candidate.max_new_tokens, stop=list(COMPLETION_STOP))


def read_open_answer(output_text: str | None) -> Grade:
    """An open prompt's answer as the task-free extractor reads it, ungraded."""
    extracted = extract_answer(output_text)
    return Grade(correct=None, invalid=extracted is None, extracted=extracted)


def note_generated_open_prompts(tasks: Iterable[str], pool: Iterable[CandidateSpec]) -> list[str]:
    """Log, one line per log-likelihood candidate and open task, that it generates its answers there; returns
    the lines."""
    open_tasks = sorted({t for t in tasks if is_open_prompt(t)})
    lines = [f"tournament: candidate {c.candidate_id} (answer_style loglik) cannot score an open prompt of task "
             f"{task!r} (no choices): it generates its answer, up to {c.max_new_tokens} new tokens"
             for c in pool if c.answer_style == "loglik" for task in open_tasks]
    for line in lines:
        logger.warning(line)
    return lines
