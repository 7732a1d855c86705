"""What the LM router reads and how its scores become a choice: ``RouterSpec`` and the prompt.

The router is a causal LM that reads one query and scores the pool in one forward
pass: the logits of one *label token* per candidate at the answer position (labels
are single tokens such as "A", "B", ...; candidate ids stay the user-facing names).
λ is never in the prompt. It is applied at decision time, outside the model:

    choice(x, λ) = argmax_c  z_c(x) − λ · s · ê_c(task)      (``jouleroute.routing.scores``)

``z_c`` are the label logits, ``ê_c`` the candidate's TRAIN mean energy on the query's
task, normalized across the pool (``energy_norm``), and ``s`` = ``utility_scale`` (logits
per unit of utility). Training fits ``z`` so that this rule reproduces the best choice at
every λ of the trained grid; a λ sweep therefore costs one pass, and the chosen energy can
only fall as λ grows. The spec is saved as ``router_spec.json`` next to the datasets and
inside every checkpoint, so a router folder is self-contained.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from jouleroute.routing.scaffold import Scaffold
from jouleroute.routing.scores import normalize_energy_map

SPEC_FILE = "router_spec.json"
DEFAULT_LABELS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# Short on purpose: every prompt token costs training and routing time on a CPU.
SYSTEM_MESSAGE = "Route the query: reply with the letter of the model that should answer it."


def default_labels(candidates: Sequence[str]) -> list[str]:
    if len(candidates) > len(DEFAULT_LABELS):
        raise ValueError(f"{len(candidates)} candidates but only {len(DEFAULT_LABELS)} default labels; "
                         "give router_data.labels explicitly")
    return list(DEFAULT_LABELS[: len(candidates)])


def format_lambda(lam: float) -> str:
    """Shortest faithful text for λ, so 0.25 reads "0.25" and 1.0 reads "1"."""
    return f"{float(lam):g}"


def normalized(energy: Mapping[str, float], candidates: Sequence[str], norm: str) -> list[float]:
    """The candidates' energies scaled to [0, 1] across the pool (1 = most expensive)."""
    scaled = normalize_energy_map({c: float(energy[c]) for c in candidates}, norm)
    return [scaled[c] for c in candidates]


@dataclass(frozen=True)
class RouterSpec:
    """Everything needed to rebuild the router's prompts and decisions, saved with the checkpoint."""

    candidates: list[str]
    labels: list[str]  # one single-token label per candidate, same order
    energy_source: str
    energy_norm: str
    label_policy: str
    lambdas: list[float]  # the trained λ grid; routing refuses λ outside [min, max]
    utility_scale: float  # logits per unit of utility in the decision rule
    max_query_tokens: int  # token budget of the query text (head and tail kept)
    task_energy_j: dict[str, dict[str, float]]  # TRAIN mean energy per task and candidate
    pool_energy_j: dict[str, float]  # TRAIN mean energy per candidate (unseen tasks)
    task_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)  # TRAIN, for reports
    scaffolds: dict[str, dict[str, str]] = field(default_factory=dict)  # task -> {prefix, suffix}

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.candidates):
            raise ValueError(f"{len(self.labels)} labels for {len(self.candidates)} candidates")
        seen: dict[str, str] = {}
        for cid, label in zip(self.candidates, self.labels):
            if label in seen:
                raise ValueError(f"candidates {seen[label]!r} and {cid!r} share the label {label!r}")
            seen[label] = cid

    @property
    def lambda_range(self) -> tuple[float, float]:
        return min(self.lambdas), max(self.lambdas)

    def check_lambda(self, lam: float) -> float:
        low, high = self.lambda_range
        if not low - 1e-12 <= lam <= high + 1e-12:
            raise ValueError(f"energy weight λ={lam:g} is outside the router's trained range "
                             f"[{low:g}, {high:g}]; retrain with a wider router_data.lambdas grid")
        return float(lam)

    def energy_row(self, task: str) -> list[float]:
        """ê_c for a query of ``task``: TRAIN mean energies of that task, normalized across the pool."""
        return normalized(self.task_energy_j.get(task, self.pool_energy_j), self.candidates, self.energy_norm)

    def energy_j_row(self, task: str) -> list[float]:
        """The TRAIN mean joules behind ``energy_row`` (what ties are broken on)."""
        energy = self.task_energy_j.get(task, self.pool_energy_j)
        return [float(energy[c]) for c in self.candidates]

    def query_text(self, question: str, task: str) -> str:
        """The part of the prompt that differs between queries: the task's shared scaffold stripped."""
        scaffold = self.scaffolds.get(task)
        return Scaffold.from_dict(scaffold).strip(question) if scaffold else question.strip()

    def save(self, directory: Path) -> Path:
        path = Path(directory) / SPEC_FILE
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        return path

    @classmethod
    def load(cls, directory: Path) -> "RouterSpec":
        path = Path(directory) / SPEC_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: a router checkpoint needs the router_spec.json written by "
                                    "the router_data stage (sft/grpo copy it into their model folder)")
        raw: dict[str, Any] = json.loads(path.read_text())
        try:
            return cls(**raw)
        except TypeError as err:
            raise ValueError(f"{path}: not a router spec of this jouleroute version ({err}); "
                             "rerun `dvc repro router_data sft grpo`") from None


def cut_tokens(tokenizer, text: str, budget: int) -> str:
    """Keep the head and the tail of ``text`` within ``budget`` tokens, cutting the middle.

    Questions open with the problem and often end with the options, so both ends matter.
    """
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= budget:
        return text
    head = budget // 2
    return (tokenizer.decode(ids[:head]).rstrip() + " [...] "
            + tokenizer.decode(ids[len(ids) - (budget - head):]).lstrip())


def prompt_text(spec: RouterSpec, tokenizer, question: str, task: str) -> str:
    """The chat-rendered prompt, ending right where the label token goes."""
    messages = [{"role": "system", "content": SYSTEM_MESSAGE},
                {"role": "user", "content": cut_tokens(tokenizer, spec.query_text(question, task),
                                                       spec.max_query_tokens)}]
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the router's tokenizer has no chat template; router prompts are chat conversations")
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def prompt_ids(spec: RouterSpec, tokenizer, question: str, task: str) -> list[int]:
    return list(tokenizer(prompt_text(spec, tokenizer, question, task), add_special_tokens=False)["input_ids"])


def label_token_ids(tokenizer, labels: Sequence[str], candidates: Sequence[str] | None = None) -> list[int]:
    """The one token id of each label; a label that is several tokens, or two labels on one id, is an error."""
    names = list(candidates or labels)
    ids: list[int] = []
    for name, label in zip(names, labels):
        encoded = tokenizer(label, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ValueError(f"label {label!r} of candidate {name!r} is {len(encoded)} tokens for this tokenizer; "
                             "router labels must be single tokens (router_data.labels)")
        if encoded[0] in ids:
            other = names[ids.index(encoded[0])]
            raise ValueError(f"labels of candidates {other!r} and {name!r} are the same token ({encoded[0]})")
        ids.append(encoded[0])
    return ids
