"""The router's prompt: one builder shared by dataset building, GRPO and inference.

The router sees a system message naming the candidate ids, then a user message
with the query, optionally a compact pool description (paradigm ``informed``), and
last the energy preference λ ("Energy weight: 0.25"). Training and inference both
call :func:`build_prompt`, so the router is never asked in a format it was not
trained on. :class:`RouterSpec` holds everything the builder needs; it is saved
as ``router_spec.json`` next to the datasets and inside every checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

SPEC_FILE = "router_spec.json"

Paradigm = Literal["bare", "informed"]


@dataclass(frozen=True)
class CandidateStats:
    """What the informed prompt says about one candidate (TRAIN split only)."""

    mean_energy_j: float
    accuracy_by_task: dict[str, float]


@dataclass(frozen=True)
class RouterSpec:
    """Everything needed to rebuild the router's prompts, saved with the checkpoint."""

    candidates: list[str]
    paradigm: Paradigm
    max_question_chars: int
    energy_source: str
    energy_norm: str
    label_policy: str
    pool: dict[str, CandidateStats] = field(default_factory=dict)

    def save(self, directory: Path) -> Path:
        path = Path(directory) / SPEC_FILE
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        return path

    @classmethod
    def load(cls, directory: Path) -> "RouterSpec":
        path = Path(directory) / SPEC_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing: a router checkpoint needs the router_spec.json written by the "
                "router_data stage (sft/grpo copy it into their model folder)"
            )
        raw: dict[str, Any] = json.loads(path.read_text())
        raw["pool"] = {cid: CandidateStats(**stats) for cid, stats in raw.get("pool", {}).items()}
        return cls(**raw)


def format_lambda(lam: float) -> str:
    """Shortest faithful text for λ, so 0.25 reads "0.25" and 1.0 reads "1"."""
    return f"{float(lam):g}"


def _system_message(spec: RouterSpec) -> str:
    # Short on purpose: every prompt token costs training time on CPU.
    return (
        "Pick the model that answers the query correctly with the least energy; a higher energy "
        f"weight favours cheaper models. Reply with one model id: {', '.join(spec.candidates)}."
    )


def _pool_lines(spec: RouterSpec, task: str) -> list[str]:
    # Only the query's own task: the full task x candidate table would triple the prompt
    # length (and the CPU training time) while the other rows carry no signal for this query.
    lines = [f"Pool on {task} (accuracy, mean energy in J, {spec.energy_source}):"]
    for cid in spec.candidates:
        stats = spec.pool[cid]
        acc = stats.accuracy_by_task.get(task)
        acc_text = "n/a" if acc is None else f"{acc:.2f}"
        lines.append(f"- {cid}: {acc_text}, {stats.mean_energy_j:.3g}")
    return lines


def shorten(text: str, limit: int) -> str:
    """Keep the head and the tail of a long question, cutting the middle.

    Truncation happens here rather than in the trainer because TRL cuts prompt+completion
    from the end, which would drop the label itself. Head and tail both matter: benchmark
    questions open with the problem, while few-shot prompts (e.g. RouterBench's) end with it.
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    return text[:head].rstrip() + " [...] " + text[len(text) - (limit - head):].lstrip()


def build_prompt(spec: RouterSpec, question: str, task: str, lam: float) -> list[dict[str, str]]:
    """The conversational prompt (TRL format: a list of messages) for one query at weight ``lam``."""
    text = shorten(question.strip(), spec.max_question_chars)
    user = [f"Query: {text}"]
    if spec.paradigm == "informed":
        user += _pool_lines(spec, task)
    # λ goes last, right before the answer: the one token that must swing the choice sits
    # at a fixed distance from it whatever the query's length.
    user.append(f"Energy weight: {format_lambda(lam)}")
    return [
        {"role": "system", "content": _system_message(spec)},
        {"role": "user", "content": "\n".join(user)},
    ]


def completion_for(candidate_id: str) -> list[dict[str, str]]:
    """The target completion (TRL conversational format) naming ``candidate_id``."""
    return [{"role": "assistant", "content": candidate_id}]


def completion_text(completion: Any) -> str:
    """Text of a completion given as a string or as TRL's list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


_STRIP = " \t\r\n\"'`.*"


def parse_choice(completion: Any, candidates: list[str] | set[str]) -> str | None:
    """The candidate a completion names, or ``None`` when it names no valid candidate.

    Strict on purpose: after trimming whitespace, quotes and a trailing period the text
    must equal one candidate id. "a or b", "model a" and "" are all invalid.
    """
    text = completion_text(completion).strip(_STRIP)
    return text if text in candidates else None
