"""Live outcomes for GRPO (``grpo.reward_source: live``, issue 19): a sampled candidate answers the query now.

``LiveOutcomes`` has the interface of ``training.partial_feedback.RevealedOutcomes`` (``reveal``,
``reveal_all``, ``restore``, ``reads``, ``revealed``, ``revealed_joules``), so ``ReplayRewards`` turns its
outcomes into the same rewards. Where an outcome comes from:

* a pair in the tournament's shard store (``paths.shards_dir``, the same config hash) is read from it,
  read-only: this never writes, clears or moves anything there (data flows forward);
* a pair in the live-pair cache (``paths.live_pairs_dir``: what earlier live rollouts of grpo or budget
  answered under the same config) is read from it;
* any other pair is run by ``tournament.run.run_job``, the tournament's own code path: its request
  builder, backend, grader, meter, row schema and ``energy_source`` labels. Its shard is written into the
  live-pair cache as soon as the batch is answered, so a killed GRPO run, a rerun, the budget curve or a
  later tournament with the same config (which reads the cache, ``plan_tournament``) never runs it again.

The cache is a cache: no stage declares it, deleting it only means its pairs are answered (and metered)
again. Each model is loaded once per GRPO run: the tournament's per-process cache holds every model of the
pool at once here (rollouts pick candidates at random, one held model would reload on every switch).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd
import torch

from jouleroute.provenance import seeded
from jouleroute.schema import PROFILE_SCHEMA, PairOutcome as Outcome
from jouleroute.tournament.loading import PROCESS_MODELS
from jouleroute.tournament.jobs import ShardJob, TournamentInputs, candidate_key, config_hash
from jouleroute.tournament.run import run_job
from jouleroute.tournament.shards import ShardStore

log = logging.getLogger(__name__)


class LiveOutcomes:
    """Outcomes of (query, candidate) pairs from the tournament's store or the live-pair cache, or run now into the
    cache; every read counted."""

    def __init__(self, inputs: TournamentInputs, energy_column: str, query_ids: Iterable[str],
                 run_id: str | None = None):
        """``query_ids``: the queries GRPO rolls out on (each must be in ``inputs.queries``); ``energy_column``:
        the column rewards read (router_data's ``stats.json``)."""
        held = max(inputs.config.models_per_worker, len({c.model for c in inputs.pool}))
        self.tournament_dir = inputs.shards_dir
        self.energy_column = energy_column
        self.run_id = run_id or f"grpo-{uuid.uuid4().hex[:8]}"
        self.candidates = {c.candidate_id: c for c in inputs.pool}
        self.keys = {cid: candidate_key(c, inputs.models[c.model]) for cid, c in self.candidates.items()}
        known = set(inputs.queries["query_id"].astype(str))
        missing = sorted(set(map(str, query_ids)) - known)
        if missing:
            raise ValueError(f"{len(missing)} GRPO train queries are not in the tournament's query table "
                             f"(paths.queries), e.g. query_id={missing[0]}: rerun router_data on this query table")
        if inputs.live_pairs_dir is None:
            raise ValueError("live rollouts need a cache for the pairs they answer: paths.live_pairs_dir")
        # run_job writes the pairs it answers into the cache, with every model of the pool held at once
        self.inputs = replace(inputs, shards_dir=Path(inputs.live_pairs_dir),
                              config=inputs.config.model_copy(update={"models_per_worker": held}))
        keys, digest = list(self.keys.values()), config_hash(inputs)
        self.__stored: dict[tuple[str, str], tuple[Outcome, str]] = {}
        profiled = [rows.to_pandas() for _shard, rows in ShardStore(inputs.shards_dir).read_valid(keys, digest)]
        self.tournament_rows = (pd.concat(profiled, ignore_index=True) if profiled
                               else PROFILE_SCHEMA.empty_table().to_pandas())
        self._load(self.tournament_rows, str(inputs.shards_dir))
        self.store = ShardStore(inputs.live_pairs_dir)
        self.store.open(digest)  # the cache's own pairs of another backend or meter are cleared
        self.store.scan(keys)  # quarantines a corrupt cached shard: its pairs are run again
        self._load(self.store.read_all(keys), str(inputs.live_pairs_dir), known=set(self.__stored))
        self.reads: Counter[tuple[str, str]] = Counter()
        self.executed: set[tuple[str, str]] = set()  # pairs this run answered (the rest came from the stores)

    def _load(self, rows: pd.DataFrame, source: str, known: set[tuple[str, str]] = frozenset()) -> None:
        """Index one store's rows; ``known``: pairs of the tournament's store, which win over a cached copy
        (the tournament adopts cached pairs, so both may hold one)."""
        if rows.empty:
            return
        if self.energy_column not in rows.columns:
            raise ValueError(f"{source}: shard rows lack field '{self.energy_column}' (params energy_policy.column)")
        for number, row in enumerate(rows.itertuples(index=False), start=1):
            pair = (str(row.query_id), str(row.candidate_id))
            if pair in known:
                continue
            if pair in self.__stored:
                raise ValueError(f"{source}: row {number}: pair query_id={pair[0]}, candidate_id={pair[1]} is "
                                 "stored twice")
            self.__stored[pair] = (Outcome(float(row.correct), float(getattr(row, self.energy_column))),
                                   str(row.energy_source))

    def reveal(self, query_id: str, candidate: str) -> Outcome:
        """One pair's outcome, run now (and stored) unless the store has it; the read is counted."""
        return self.reveal_all([(query_id, candidate)])[0]

    def reveal_all(self, pairs: Sequence[tuple[str, str]]) -> list[Outcome]:
        """The outcomes of a batch of rollouts: the pairs not stored yet run in one batch per candidate
        (at most its ``batch_size`` queries each, as the tournament batches them), each batch stored when done."""
        pairs = [(str(q), str(c)) for q, c in pairs]
        unknown = sorted({c for _q, c in pairs} - set(self.candidates))
        if unknown:
            raise KeyError(f"candidate(s) {unknown} are not in the tournament's pool {sorted(self.candidates)}")
        pending: dict[str, list[str]] = defaultdict(list)
        for qid, cid in dict.fromkeys(pairs):
            if (qid, cid) not in self.__stored:
                pending[cid].append(qid)
        for cid, qids in pending.items():
            size = self.candidates[cid].batch_size
            for start in range(0, len(qids), size):
                self._run(cid, tuple(qids[start:start + size]))
        outcomes = []
        for pair in pairs:
            self.reads[pair] += 1
            outcomes.append(self.__stored[pair][0])
        return outcomes

    def _run(self, cid: str, batch: tuple[str, ...]) -> None:
        """One batch through the tournament's ``run_job``; its shard is read back (what a rerun would read)."""
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
        # run_job seeds everything (as the tournament does): the trainer's generators continue untouched
        with torch.random.fork_rng(devices=cuda), seeded(self.inputs.config.seed):
            run_job(self.inputs, ShardJob(cid, self.keys[cid], (batch,)), self.run_id)
        path = self.store.path_for(self.keys[cid], list(batch))
        self._load(pd.read_parquet(path), str(path))
        self.executed.update((qid, cid) for qid in batch)
        log.info("live: %s answered %d quer%s -> %s", cid, len(batch), "y" if len(batch) == 1 else "ies", path)

    def restore(self, reads: Sequence[Sequence[Any]]) -> None:
        """Counts saved with a checkpoint. A pair read before it that neither store holds any more (the cache
        was deleted) is answered again, with a warning: the resumed run goes on from the same reads."""
        counts = {(str(qid), str(cid)): int(count) for qid, cid, count in reads}
        lost = [pair for pair in counts if pair not in self.__stored]
        if lost:
            log.warning("live: %d pair(s) read before the checkpoint are in neither %s nor %s; answering them "
                        "again", len(lost), self.tournament_dir, self.inputs.shards_dir)
            self.reveal_all(lost)
        self.reads = Counter(counts)

    @property
    def revealed(self) -> set[tuple[str, str]]:
        return set(self.reads)

    def revealed_joules(self) -> float:
        return sum(self.__stored[pair][0].energy_j for pair in self.reads)

    def revealed_by_source(self, default: str) -> dict[str, float]:
        """Joules of the distinct pairs read, per the ``energy_source`` their rows carry."""
        by_source: dict[str, float] = defaultdict(float)
        for pair in self.reads:
            outcome, source = self.__stored[pair]
            by_source[source] += outcome.energy_j
        return dict(by_source)

    def stored_rows(self, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
        """The stored rows of ``pairs`` (the profile's schema; the tournament's copy of a pair first): what a
        tournament of them writes."""
        rows = pd.concat([self.tournament_rows, self.store.read_all(list(self.keys.values()))], ignore_index=True)
        rows = rows.drop_duplicates(["query_id", "candidate_id"], keep="first")
        wanted = {(str(q), str(c)) for q, c in pairs}
        keep = [(str(q), str(c)) in wanted for q, c in zip(rows["query_id"], rows["candidate_id"])]
        return rows[keep].reset_index(drop=True)

    def close(self) -> None:
        """Free the candidates' models (the GRPO run is over)."""
        PROCESS_MODELS.release()
