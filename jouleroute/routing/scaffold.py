"""Strip the scaffolding that every prompt of a task shares, so routers see the query itself.

Benchmark prompts are often few-shot: every prompt of a task opens with the same
block of worked examples and closes with the same instruction line. An encoder
that keeps only the first few hundred tokens (all-MiniLM keeps 256) then sees the
same vector for every query of the task, and a router trained on those vectors
can only learn per-task choices. The rule here is generic: per task, the text
shared by all of its training prompts is scaffolding, and is removed before
embedding, at training and at routing time alike.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scaffold:
    """Text every prompt of one task opens (``prefix``) and closes (``suffix``) with."""

    prefix: str = ""
    suffix: str = ""

    def strip(self, text: str) -> str:
        """``text`` without the prefix and suffix it carries, trimmed; never an empty query.

        A text that is all scaffold (or does not carry it) keeps its own content:
        routing an empty string would throw the query away.
        """
        body = text[len(self.prefix):] if self.prefix and text.startswith(self.prefix) else text
        if self.suffix and body.endswith(self.suffix):
            body = body[: len(body) - len(self.suffix)]
        return body.strip() or text.strip()

    def __bool__(self) -> bool:
        """True when it strips anything."""
        return bool(self.prefix or self.suffix)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> "Scaffold":
        return cls(prefix=str(data.get("prefix", "")), suffix=str(data.get("suffix", "")))


def _snap_prefix(common: str) -> str:
    """``common`` cut right after its last newline (else its last whitespace), so no word is split."""
    cut = common.rfind("\n")
    if cut < 0:
        cut = max((i for i, ch in enumerate(common) if ch.isspace()), default=-1)
    return common[: cut + 1]


def _snap_suffix(common: str) -> str:
    """``common`` from its first newline (else its first whitespace) on, so no word is split."""
    start = common.find("\n")
    if start < 0:
        start = next((i for i, ch in enumerate(common) if ch.isspace()), len(common))
    return common[start:]


def _common_suffix(texts: Sequence[str]) -> str:
    reversed_common = os.path.commonprefix([t[::-1] for t in texts])
    return reversed_common[::-1]


def learn_scaffold(texts: Sequence[str], min_prompts: int = 5, min_chars: int = 16) -> Scaffold:
    """The scaffold of one task's prompts: their longest common prefix and suffix, snapped to word boundaries.

    A part shorter than ``min_chars`` is kept out (a shared "Question: " is not
    worth stripping); fewer than ``min_prompts`` distinct texts give no scaffold,
    since what a handful of prompts share may well be content.
    """
    if min_prompts < 2:
        raise ValueError(f"min_prompts must be at least 2 (one prompt is all scaffold), got {min_prompts}")
    distinct = sorted(set(texts))
    if len(distinct) < min_prompts:
        return Scaffold()
    prefix = _snap_prefix(os.path.commonprefix(distinct))
    prefix = prefix if len(prefix) >= min_chars else ""
    common_suffix = _common_suffix(distinct)
    # Prefix and suffix must not overlap on the shortest prompt: keep only the suffix that fits.
    room = min(len(t) for t in distinct) - len(prefix)
    suffix = _snap_suffix(common_suffix[max(0, len(common_suffix) - room):])
    suffix = suffix if len(suffix) >= min_chars else ""
    return Scaffold(prefix, suffix)


def learn_scaffolds(
    texts_by_task: Mapping[str, Sequence[str]], min_prompts: int = 5, min_chars: int = 16
) -> dict[str, Scaffold]:
    """Per task, the text all of its prompts share (see ``learn_scaffold``); an empty ``Scaffold`` where none."""
    scaffolds: dict[str, Scaffold] = {}
    for task in sorted(texts_by_task):
        scaffolds[task] = scaffold = learn_scaffold(texts_by_task[task], min_prompts, min_chars)
        if scaffold:
            log.info("task %s: stripping a %d-char prefix and a %d-char suffix shared by its prompts",
                     task, len(scaffold.prefix), len(scaffold.suffix))
    return scaffolds


def strip_queries(questions: Sequence[str], tasks: Sequence[str], scaffolds: Mapping[str, Scaffold]) -> list[str]:
    """Each question without its task's scaffold; a task without one only loses surrounding whitespace."""
    if len(questions) != len(tasks):
        raise ValueError(f"{len(questions)} questions but {len(tasks)} tasks")
    none = Scaffold()
    return [scaffolds.get(task, none).strip(question) for question, task in zip(questions, tasks)]
