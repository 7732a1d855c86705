"""The tournament's units of work: its inputs, the shard folder of a candidate version, the jobs a run is cut into.

``run.py`` plans and runs them; a Dask worker (``tasks/shard.py``) gets a ``ShardJob`` and the ``TournamentInputs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from jouleroute.backends import BackendConfig
from jouleroute.energy import EnergyConfig
from jouleroute.pool import CandidateSpec, ModelSpec
from jouleroute.provenance import stable_hash
from jouleroute.tournament.config import TournamentConfig
from jouleroute.tournament.lanes import served_on_its_node
from jouleroute.tournament.served import ModelledRate
from jouleroute.tournament.shards import ShardStore

ProgressFactory = Callable[[int, str], Callable[[int], None]]


@dataclass
class TournamentInputs:
    queries: pd.DataFrame
    pool: Sequence[CandidateSpec]
    models: dict[str, ModelSpec]
    backend: BackendConfig
    energy: EnergyConfig
    config: TournamentConfig
    models_dir: Path
    shards_dir: Path
    profile_path: Path
    data_dir: Path  # benchmark files, for few-shot exemplars
    # served candidates (backend.kind openai): modelled per-token joules, used without (or after losing) an exporter
    modelled: dict[str, ModelledRate] = field(default_factory=dict)
    # pairs GRPO's and budget's live rollouts answered (tournament.live): a cache the tournament only reads
    live_pairs_dir: Path | None = None

    def is_served(self, candidate: CandidateSpec) -> bool:
        """Metered on its GPU node (or modelled), never by this process: an openai candidate with `energy`."""
        return served_on_its_node(self.backend.kind, candidate)


def config_hash(inp: TournamentInputs) -> str:
    """What makes two runs' shards comparable: the backend and the meter.

    The query set is not part of it: query ids are stable, so growing the sample
    only computes the new queries, and the profile keeps only the current ones.
    """
    return stable_hash({
        "backend": inp.backend.model_dump(),
        "energy": inp.energy.model_dump(),
        "seed": inp.config.seed,
    })


def candidate_key(candidate: CandidateSpec, model: ModelSpec) -> str:
    """Shard folder of one candidate version: its id plus a hash of how it is asked."""
    return f"{candidate.candidate_id}-{stable_hash([candidate.model_dump(), model.model_dump()], 8)}"


@dataclass(frozen=True)
class ShardJob:
    """Consecutive batches of one candidate, in the serial run's order: the unit one worker runs.

    Batches are cut exactly as a serial run cuts them, so a distributed run feeds the
    model the same batches (same padding) and greedy outputs are identical.
    """
    candidate_id: str
    key: str  # shard folder (candidate version)
    batches: tuple[tuple[str, ...], ...]  # query ids per batch
    # a served candidate's metered device (lanes.py): jobs of one lane never run at once, so windows on one
    # exporter GPU never overlap; "" for a job metered by the process that runs it
    lane: str = ""

    @property
    def n_pairs(self) -> int:
        return sum(len(b) for b in self.batches)


@dataclass
class TournamentPlan:
    queries: pd.DataFrame
    keys: dict[str, str]  # candidate_id -> shard folder
    jobs: list[ShardJob]
    done_pairs: int
    store: ShardStore
    state: dict


# Runs the jobs somewhere (in this process by default; flows/ runs them as Prefect tasks on Dask) and
# returns their shard reports.
JobRunner = Callable[[TournamentInputs, list[ShardJob], str], list[dict]]
