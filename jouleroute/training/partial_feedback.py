"""Partial feedback for GRPO (issue 19): outcomes revealed pair by pair, and what profiling cost.

SFT fits a full tournament of a share of the train queries (``tournament.train_fraction``: the
*profiled* queries, every candidate run on each). With ``grpo.reward_source: replay`` GRPO trains
on the other train queries, where it only sees the outcome of the candidates it sampled:

* ``RevealedOutcomes`` holds the outcome table of those queries and hands it out only one
  (query, candidate) pair at a time through ``reveal``, counting each read. Nothing else in GRPO
  gets the table, so a pair never revealed is never read (the test poisons them all).
* ``ReplayRewards`` turns revealed outcomes into the same rewards as ``training.rewards``. What a
  reward needs beyond the one pair (the task prior of ``expected_correctness``, the other
  candidates' joules that normalize the energy) comes from the profiled queries only.
* ``profiling_joules`` is the router's profiling bill: every pair of the profiled queries plus
  every distinct pair GRPO revealed, in joules, under the profile's energy-source label.

``grpo.reward_source: live`` swaps the table for ``tournament.live.LiveOutcomes`` (``Outcomes``): a
sampled pair is read from the tournament's shard store or the live-pair cache, or run through the
tournament's backend into the cache, and the rewards are the same ``ReplayRewards``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from transformers import TrainerCallback

from jouleroute.routing.scores import energy_penalty as penalty_term
from jouleroute.routing.scores import normalize_energy_map
from jouleroute.routing.utility import shrunk_correct
from jouleroute.sampling import profiled_ids  # noqa: F401  (where the tournament reads it too)
from jouleroute.schema import PairOutcome as Outcome
from jouleroute.training.rewards import completion_text, get_reward

PROFILED_FILE = "profiled_queries.json"  # written by SFT next to its model: the queries it fitted


def write_profiled(out_dir: Path, ids: Sequence[str], fraction: float, seed: int) -> Path:
    path = Path(out_dir) / PROFILED_FILE
    path.write_text(json.dumps({"fraction": fraction, "seed": seed, "query_ids": list(ids)}, indent=1) + "\n")
    return path


def read_profiled(sft_dir: Path) -> list[str]:
    path = Path(sft_dir) / PROFILED_FILE
    if not path.is_file():
        raise ValueError(f"{path} is missing: rerun the sft stage (it records the queries it fitted)")
    ids = json.loads(path.read_text()).get("query_ids")
    if not isinstance(ids, list) or not ids:
        raise ValueError(f"{path}: field 'query_ids' must be a non-empty list")
    return [str(i) for i in ids]


class Outcomes(Protocol):
    """Where partial feedback gets outcomes: ``RevealedOutcomes`` (replay) or ``tournament.live.LiveOutcomes``."""

    reads: Counter[tuple[str, str]]

    def reveal_all(self, pairs: Sequence[tuple[str, str]]) -> list[Outcome]: ...
    def restore(self, reads: Sequence[Sequence[Any]]) -> None: ...
    @property
    def revealed(self) -> set[tuple[str, str]]: ...
    def revealed_joules(self) -> float: ...
    def revealed_by_source(self, default: str) -> dict[str, float]: ...


class RevealedOutcomes:
    """An outcome table read one (query, candidate) pair at a time, every read counted.

    The table lives in a name-mangled attribute that only ``reveal`` and the accounting of
    already revealed pairs touch: the rewards get outcomes from ``reveal`` and nothing else.
    """

    def __init__(self, table: Mapping[tuple[str, str], Outcome]):
        self.__table = dict(table)
        self.reads: Counter[tuple[str, str]] = Counter()

    @classmethod
    def from_rows(cls, rows: Sequence[dict], source: Path) -> "RevealedOutcomes":
        table = {}
        for number, row in enumerate(rows, start=1):
            correct, energy = row.get("correct_by_candidate"), row.get("energy_by_candidate")
            if not isinstance(correct, dict) or not isinstance(energy, dict) or set(correct) != set(energy):
                raise ValueError(f"{source}: row {number} (query_id={row.get('query_id')}): fields "
                                 "'correct_by_candidate' and 'energy_by_candidate' must name the same candidates")
            for cid in correct:
                table[(str(row["query_id"]), cid)] = Outcome(float(correct[cid]), float(energy[cid]))
        return cls(table)

    def reveal(self, query_id: str, candidate: str) -> Outcome:
        """The outcome of one pair; the read is counted (a rollout of that candidate on that query)."""
        try:
            outcome = self.__table[(query_id, candidate)]
        except KeyError:
            raise KeyError(f"no outcome for query_id={query_id}, candidate={candidate}") from None
        self.reads[(query_id, candidate)] += 1
        return outcome

    def reveal_all(self, pairs: Sequence[tuple[str, str]]) -> list[Outcome]:
        """The outcomes of a batch of rollouts, in order (``LiveOutcomes`` runs the missing ones in batches)."""
        return [self.reveal(qid, cid) for qid, cid in pairs]

    def restore(self, reads: Sequence[Sequence[Any]]) -> None:
        """Counts saved with a checkpoint (``[query_id, candidate, reads]`` rows): a resumed run keeps them."""
        for qid, cid, count in reads:
            if (str(qid), str(cid)) not in self.__table:
                raise ValueError(f"saved reveal names an unknown pair: query_id={qid}, candidate={cid}")
            self.reads[(str(qid), str(cid))] = int(count)

    @property
    def revealed(self) -> set[tuple[str, str]]:
        return set(self.reads)

    def revealed_joules(self) -> float:
        """Joules of the distinct revealed pairs: a pair run once is stored, a second read costs nothing."""
        return sum(self.__table[pair].energy_j for pair in self.reads)

    def revealed_by_source(self, default: str) -> dict[str, float]:
        """The revealed joules under the profile's label ``default`` (a replayed table carries no other)."""
        return {default: self.revealed_joules()} if self.reads else {}


class RevealedCheckpoints(TrainerCallback):
    """Saves the reveal counts into each checkpoint, so a run resumed from it accounts for earlier reads."""

    FILE = "revealed_pairs.json"

    def __init__(self, outcomes: Outcomes):
        self.outcomes = outcomes

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            reads = [[q, c, n] for (q, c), n in sorted(self.outcomes.reads.items())]
            (folder / self.FILE).write_text(json.dumps(reads))

    @classmethod
    def restore(cls, outcomes: Outcomes, checkpoint: Path) -> None:
        path = Path(checkpoint) / cls.FILE
        if not path.is_file():
            raise ValueError(f"{path} is missing: the checkpoint cannot say which pairs were revealed before it")
        outcomes.restore(json.loads(path.read_text()))


def task_means(rows: Sequence[dict], column: str) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(task -> candidate -> mean of ``column``, candidate -> overall mean) over ``rows``."""
    by_task: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    overall: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for cid, value in row[column].items():
            by_task[str(row["task"])][cid].append(float(value))
            overall[cid].append(float(value))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return ({t: {c: mean(v) for c, v in cs.items()} for t, cs in by_task.items()},
            {c: mean(v) for c, v in overall.items()})


class ReplayRewards:
    """The rewards of ``training.rewards``, computed from revealed outcomes only.

    TRL calls each reward function on the same batch in turn; the first call reveals the named
    candidate of every completion and the others reuse it, so one rollout is one read.

    * ``correctness``: the revealed outcome.
    * ``expected_correctness``: ``(outcome + k·prior) / (1 + k)``, the prior being the candidate's
      accuracy on the task over the profiled queries (router_data's shrinkage, ``k = prior_strength``).
    * ``energy_penalty``: ``−λ·norm(e)``, normalizing the revealed joules against the other
      candidates' mean joules on the task over the profiled queries (their joules on this query
      are unknown to a partial-feedback learner).
    * ``format``: as in ``training.rewards``. An invalid completion reveals nothing.
    """

    def __init__(self, outcomes: Outcomes, labels: Sequence[str], candidates: Sequence[str],
                 profiled_rows: Sequence[dict], energy_norm: str, prior_strength: float):
        self.outcomes = outcomes
        self.name_of = dict(zip(labels, candidates))
        self.candidates = list(candidates)
        self.prior, self.prior_all = task_means(profiled_rows, "correct_by_candidate")
        self.reference, self.reference_all = task_means(profiled_rows, "energy_by_candidate")
        self.energy_norm, self.k = energy_norm, float(prior_strength)
        self._batch: Any = None  # the completions list of the last revealed batch (held, so its id stays unique)
        self._observed: list[tuple[str | None, Outcome | None]] = []

    def observe(self, completions: Sequence[Any], query_id: Sequence[str]) -> list[tuple[str | None, Outcome | None]]:
        if completions is self._batch:
            return self._observed
        if len(query_id) != len(completions):
            raise ValueError(f"'query_id' has {len(query_id)} rows for {len(completions)} completions")
        picks = [self.name_of.get(completion_text(c).strip(" \t\r\n\"'`.*")) for c in completions]
        # one call per batch: live outcomes run the pairs not stored yet together
        revealed = iter(self.outcomes.reveal_all([(str(q), c) for c, q in zip(picks, query_id) if c is not None]))
        observed = [(cid, next(revealed) if cid is not None else None) for cid in picks]
        self._batch, self._observed = completions, observed
        return observed

    def _prior(self, task: str, cid: str) -> float:
        return self.prior.get(task, {}).get(cid, self.prior_all.get(cid, 0.0))

    def norm_energy(self, task: str, cid: str, joules: float) -> float:
        reference = {c: self.reference.get(task, {}).get(c, self.reference_all.get(c, 0.0)) for c in self.candidates}
        reference[cid] = joules
        return normalize_energy_map(reference, self.energy_norm)[cid]

    def correctness(self, completions, query_id, **_: Any) -> list[float]:
        return [o.correct if o is not None else 0.0 for _c, o in self.observe(completions, query_id)]

    def expected_correctness(self, completions, query_id, task, **_: Any) -> list[float]:
        return [shrunk_correct(o.correct, self._prior(t, c), self.k) if o is not None else 0.0
                for (c, o), t in zip(self.observe(completions, query_id), task)]

    def energy_penalty(self, completions, query_id, task, lam, **_: Any) -> list[float]:
        return [-penalty_term(self.norm_energy(t, c, o.energy_j) if o is not None else 1.0, float(weight))
                for (c, o), t, weight in zip(self.observe(completions, query_id), task, lam)]

    def format(self, completions, query_id, **_: Any) -> list[float]:
        return [0.0 if c is not None else -1.0 for c, _o in self.observe(completions, query_id)]

    def build(self, weights: Mapping[str, float]) -> tuple[list[Callable], list[float]]:
        """Reward functions and weights in config order, named as ``rewards.build_rewards`` names them."""
        funcs, values = [], []
        for name, weight in weights.items():
            get_reward(name)  # the same registry, the same error for an unknown name
            method = getattr(self, name)

            def named(completions, _method=method, **columns):
                return _method(completions, **columns)

            named.__name__ = name
            funcs.append(named)
            values.append(float(weight))
        if funcs:
            funcs[0] = self._logged(funcs[0])
        return funcs, values

    def _logged(self, reward: Callable) -> Callable:
        """The first reward also logs the share of completions per candidate and the chosen normalized energy."""

        def tracked(completions, log_metric=None, **columns):
            if log_metric is not None:
                observed = self.observe(completions, columns["query_id"])
                counts = Counter(c or "invalid" for c, _o in observed)
                for cid in [*self.candidates, "invalid"]:
                    log_metric(f"choices/{cid}", counts.get(cid, 0) / len(observed))
                by_lam: dict[float, list[float]] = defaultdict(list)
                for (c, o), t, lam in zip(observed, columns["task"], columns["lam"]):
                    by_lam[float(lam)].append(self.norm_energy(t, c, o.energy_j) if o is not None else 1.0)
                from jouleroute.routing.lm.spec import format_lambda

                for lam, values in by_lam.items():
                    log_metric(f"chosen_norm_energy/lam_{format_lambda(lam)}", sum(values) / len(values))
                log_metric("revealed_pairs", float(len(self.outcomes.revealed)))
                if hasattr(self.outcomes, "executed"):  # live: the pairs this run answered
                    log_metric("executed_pairs", float(len(self.outcomes.executed)))
            return reward(completions, **columns)

        tracked.__name__ = reward.__name__
        return tracked


def pairs_joules(rows: Sequence[dict]) -> tuple[int, float]:
    """(pairs, joules) of a full tournament of ``rows``: every candidate on every query."""
    pairs = sum(len(r["energy_by_candidate"]) for r in rows)
    return pairs, sum(float(e) for r in rows for e in r["energy_by_candidate"].values())


def profiling_joules(energy_source: str, energy_column: str, reward_source: str, tournament_rows: Sequence[dict],
                     outcomes: Outcomes | None) -> dict[str, Any]:
    """The router's profiling bill: the full-tournament pairs it trained on plus GRPO's revealed pairs.

    ``tournament_rows``: the queries whose every pair was run for training (SFT's profiled set, and
    with ``reward_source: profile`` every query GRPO read the full profile of). Revealed pairs carry
    the profile's label (replay) or their own rows' (live: read from the stores or run by GRPO).
    """
    pairs, joules = pairs_joules(tournament_rows)
    revealed = outcomes.revealed_joules() if outcomes is not None else 0.0
    by_source: Counter[str] = Counter({energy_source: joules} if tournament_rows else {})
    if outcomes is not None:
        by_source.update(outcomes.revealed_by_source(energy_source))
    grpo = {"pairs": len(outcomes.revealed) if outcomes is not None else 0,
            "rollouts": sum(outcomes.reads.values()) if outcomes is not None else 0, "joules": revealed}
    if outcomes is not None and hasattr(outcomes, "executed"):  # live: how many of those pairs this run answered
        grpo["executed_pairs"] = len(outcomes.executed)
    return {
        "energy_source": energy_source,  # the profile's label(s): the tournament pairs' (by_source splits them all)
        "energy_column": energy_column,
        "reward_source": reward_source,
        "tournament": {"queries": len(tournament_rows), "pairs": pairs, "joules": joules},
        "grpo_revealed": grpo,
        "total_joules": joules + revealed,
        "by_source": dict(by_source),
    }
