"""Stage ``router_data``: router datasets from the profile's TRAIN split (VAL for held-out checks).

Writes to ``out_dir`` (DVC outs):

* ``train.jsonl`` one row per train query: question, task, every candidate's correctness and
  energy, and ``labels``: the label policy's choice at each λ of ``lambdas``. SFT fits all of
  a query's labels in one pass; GRPO crosses the rows with ``grpo.lambdas`` for its rewards.
* ``val.jsonl``  VAL queries x the whole grid, with labels and per-candidate outcomes.
* ``router_spec.json`` candidates and their label tokens, the trained λ grid, the decision
  rule's scale and energy tables, and each task's shared prompt scaffold (learned on TRAIN).
* ``stats.json`` counts, label distributions per λ, majority labels.

TEST rows are dropped on entry and never read.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from jouleroute.energy.config import EnergyPolicy
from jouleroute.schema import ENERGY_SOURCES
from jouleroute.training.config import RouterDataConfig
from jouleroute.routing.lm.spec import RouterSpec, default_labels, format_lambda
from jouleroute.routing.scaffold import learn_scaffolds
from jouleroute.routing.utility import cheapest_correct_label, expected_utility_label, shrunk_correct, utility_label

log = logging.getLogger(__name__)

PROFILE_NEEDS = ("query_id", "candidate_id", "task", "split", "correct", "energy_source")
QUERY_NEEDS = ("query_id", "task", "split", "question")


def _require(frame: pd.DataFrame, columns: tuple[str, ...], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} table lacks column(s) {missing}; it has {list(frame.columns)}")


def _validate(profile: pd.DataFrame, queries: pd.DataFrame, energy: EnergyPolicy) -> list[str]:
    """Checks the profile rows we use; returns the candidate ids (sorted)."""
    _require(profile, PROFILE_NEEDS + (energy.column,), "profile")
    _require(queries, QUERY_NEEDS, "query")
    joules = pd.to_numeric(profile[energy.column], errors="coerce")
    checks = [
        (~(joules.notna() & joules.between(0, float("inf"))), energy.column, "a finite number >= 0"),
        (~pd.to_numeric(profile["correct"], errors="coerce").between(0, 1), "correct",
         "in [0, 1] (an expected correctness: 0/1, or a fraction such as pass@1)"),
        (~profile["energy_source"].isin(ENERGY_SOURCES), "energy_source", f"one of {ENERGY_SOURCES}"),
    ]
    for bad, column, expected in checks:
        if bad.any():
            index = bad[bad].index[0]
            row = profile.loc[index]
            raise ValueError(f"profile row {index} (query_id={row['query_id']}, candidate_id={row['candidate_id']}): "
                             f"field '{column}' must be {expected}, got {row[column]!r} ({int(bad.sum())} such rows)")
    dup = profile[profile.duplicated(["query_id", "candidate_id"], keep=False)]
    if len(dup):
        first = dup.iloc[0]
        raise ValueError(f"profile has {len(dup)} duplicate (query_id, candidate_id) rows, e.g. row {dup.index[0]} "
                         f"({first['query_id']}, {first['candidate_id']})")
    candidates = sorted(profile["candidate_id"].unique())
    counts = profile.groupby("query_id")["candidate_id"].nunique()
    partial = counts[counts < len(candidates)]
    if len(partial):
        raise ValueError(f"{len(partial)} queries lack some candidate's profile row (rewards need all of them), "
                         f"e.g. query_id={partial.index[0]} has {partial.iloc[0]} of {len(candidates)}")
    sources = sorted(profile["energy_source"].unique())
    if len(sources) > 1 and not energy.allow_mixed_sources:
        raise ValueError(f"profile mixes energy sources {sources}; labels would compare unlike numbers. "
                         "Set energy_policy.allow_mixed_sources: true to accept it.")
    known = queries.set_index("query_id")
    missing = sorted(set(profile["query_id"]) - set(known.index))
    if missing:
        raise ValueError(f"{len(missing)} profile query_ids are not in the query table, e.g. {missing[0]}")
    split_of = known["split"].reindex(profile["query_id"]).to_numpy()
    clash = profile[profile["split"].to_numpy() != split_of]
    if len(clash):
        row = clash.iloc[0]
        raise ValueError(f"profile row {clash.index[0]} (query_id={row['query_id']}): field 'split' is "
                         f"{row['split']!r} but the query table says {known.loc[row['query_id'], 'split']!r}")
    return candidates


def _pool_tables(train: pd.DataFrame, energy_column: str, candidates: list[str]) -> dict[str, Any]:
    """TRAIN means the router's decision rule and reports use: energy per task and overall, accuracy per task."""
    energy = train.groupby(["task", "candidate_id"])[energy_column].mean()
    accuracy = train.groupby(["task", "candidate_id"])["correct"].mean()
    overall = train.groupby("candidate_id")[energy_column].mean()
    tasks = sorted(train["task"].unique())
    return {
        "task_energy_j": {t: {c: float(energy[(t, c)]) for c in candidates} for t in tasks},
        "pool_energy_j": {c: float(overall[c]) for c in candidates},
        "task_accuracy": {t: {c: round(float(accuracy[(t, c)]), 4) for c in candidates} for t in tasks},
    }


def _expected(value) -> int | float:
    """A correctness as the labels read it: an expectation in [0, 1]; 0/1 stay ints (the files do not change)."""
    number = float(value)
    return int(number) if number in (0.0, 1.0) else number


def _outcomes(frame: pd.DataFrame, energy_column: str, train: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """query_id -> {task, correct: {cid: correctness in [0, 1]}, energy: {cid: J}, prior: {cid: task accuracy}}.

    ``prior`` is each candidate's TRAIN accuracy on the query's task, leaving the query
    itself out when it is a train query (its own outcome is counted once, not twice); a
    task with no other train query falls back to the candidate's overall train accuracy.
    """
    hits = train.groupby(["task", "candidate_id"])["correct"].agg(["sum", "count"])
    overall = train.groupby("candidate_id")["correct"].mean()
    train_ids = set(train["query_id"])
    out: dict[str, dict[str, Any]] = {}
    for qid, group in frame.groupby("query_id", sort=True):
        task = str(group["task"].iloc[0])
        correct = {str(c): _expected(v) for c, v in zip(group["candidate_id"], group["correct"])}
        prior = {}
        for cid, own in correct.items():
            total, count = hits.loc[(task, cid)] if (task, cid) in hits.index else (0, 0)
            if qid in train_ids:
                total, count = total - own, count - 1
            prior[cid] = float(total / count) if count > 0 else float(overall.get(cid, 0.0))
        out[str(qid)] = {
            "task": task,
            "correct": correct,
            "energy": {str(c): float(v) for c, v in zip(group["candidate_id"], group[energy_column])},
            "prior": prior,
        }
    return out


UNPROFILED = "unprofiled.jsonl"  # train queries with no tournament row: GRPO's live rollouts answer them


def _unprofiled(queries: pd.DataFrame, profiled: set[str], questions: dict[str, str]) -> list[dict[str, Any]]:
    """Train queries of the query table the profile lacks (query_id, task, question), sorted by id: with
    ``grpo.reward_source: live`` the tournament profiles only SFT's share and GRPO learns on these."""
    train = queries[queries["split"] == "train"].drop_duplicates("query_id")
    rest = train[~train["query_id"].isin(profiled)].sort_values("query_id")
    return [{"query_id": str(q), "task": str(t), "question": questions[q]} for q, t in zip(rest["query_id"], rest["task"])]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")


def run_router_data(profile: pd.DataFrame, queries: pd.DataFrame, cfg: RouterDataConfig, out_dir: Path,
                    energy: EnergyPolicy = EnergyPolicy()) -> dict:
    """Build train/val datasets, router_spec.json and stats.json in ``out_dir``; returns the stats.
    ``energy`` (params ``energy_policy``): the column, norm and mixing rule the labels use."""
    rng = random.Random(cfg.seed)
    profile = profile[profile["split"].isin(["train", "val"])]  # TEST never enters this stage
    candidates = _validate(profile, queries, energy)
    train = profile[profile["split"] == "train"]
    if train.empty:
        raise ValueError("profile has no train rows: router_data builds its datasets from the TRAIN split only")
    train_ids = sorted(train["query_id"].unique())
    if cfg.max_train_queries is not None and len(train_ids) > cfg.max_train_queries:
        train_ids = sorted(rng.sample(train_ids, cfg.max_train_queries))
        train = train[train["query_id"].isin(train_ids)]

    known = queries.drop_duplicates("query_id").set_index("query_id")
    questions = known["question"].astype(str).to_dict()
    scaffolds = {}
    if cfg.strip_scaffold:  # learned on TRAIN questions only, applied to every split
        by_task: dict[str, list[str]] = {}
        for qid in train_ids:
            by_task.setdefault(str(known.loc[qid, "task"]), []).append(questions[qid])
        scaffolds = {t: s.to_dict() for t, s in learn_scaffolds(by_task).items() if s.prefix or s.suffix}
    spec = RouterSpec(candidates=candidates, labels=list(cfg.labels) if cfg.labels else default_labels(candidates),
                      energy_source=",".join(sorted(profile["energy_source"].unique())),
                      energy_norm=energy.norm, label_policy=cfg.label_policy, lambdas=list(cfg.lambdas),
                      utility_scale=cfg.utility_scale, max_query_tokens=cfg.max_query_tokens, scaffolds=scaffolds,
                      **_pool_tables(train, energy.column, candidates))

    def label(outcome: dict[str, Any], lam: float) -> str:
        if cfg.label_policy == "utility":
            return utility_label(outcome["correct"], outcome["energy"], lam, energy.norm, candidates)
        if cfg.label_policy == "expected_utility":
            return expected_utility_label(outcome["correct"], outcome["energy"], lam, energy.norm, candidates,
                                          outcome["prior"], cfg.prior_strength)
        task = outcome["task"]
        task_acc = {c: spec.task_accuracy.get(task, {}).get(c, 0.0) for c in candidates}
        return cheapest_correct_label(outcome["correct"], outcome["energy"], candidates, cfg.fallback,
                                      task_acc, spec.pool_energy_j)

    def row(qid: str, outcome: dict[str, Any]) -> dict[str, Any]:
        return {"query_id": qid, "task": outcome["task"], "question": questions[qid],
                "correct_by_candidate": outcome["correct"], "energy_by_candidate": outcome["energy"]}

    train_outcomes = _outcomes(train, energy.column, train)
    k = cfg.prior_strength  # GRPO's expected_correctness reward: the outcome shrunk toward the task prior
    train_rows = [{**row(qid, o), "labels": {format_lambda(lam): label(o, lam) for lam in cfg.lambdas},
                   "expected_correct_by_candidate": {c: shrunk_correct(o["correct"][c], o["prior"][c], k)
                                                     for c in candidates}}
                  for qid, o in train_outcomes.items()]
    val = profile[profile["split"] == "val"]
    val_ids = sorted(val["query_id"].unique())
    if cfg.max_val_queries is not None and len(val_ids) > cfg.max_val_queries:
        val = val[val["query_id"].isin(rng.sample(val_ids, cfg.max_val_queries))]
    val_rows = [{**row(qid, o), "lam": lam, "label": label(o, lam)}
                for qid, o in _outcomes(val, energy.column, train).items() for lam in cfg.lambdas]

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_jsonl(out_dir / "train.jsonl", train_rows)
    _write_jsonl(out_dir / "val.jsonl", val_rows)
    unprofiled = _unprofiled(queries, set(profile.loc[profile["split"] == "train", "query_id"]), questions)
    (out_dir / UNPROFILED).unlink(missing_ok=True)
    if unprofiled:  # grpo.reward_source live: the tournament ran only SFT's share of the train queries
        _write_jsonl(out_dir / UNPROFILED, unprofiled)
    spec.save(out_dir)
    stats = _stats(cfg, energy, spec, train_outcomes, label, train_rows, val_rows)
    stats["n_unprofiled_train_queries"] = len(unprofiled)
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True))
    log.info("router_data: %d train queries x %d λ, %d val rows for %d candidates (scaffold stripped on %d tasks)",
             len(train_rows), len(cfg.lambdas), len(val_rows), len(candidates), len(scaffolds))
    return stats


def _stats(cfg, energy, spec, train_outcomes, label, train_rows, val_rows) -> dict[str, Any]:
    """Label distribution and mean label energy per λ over ALL train queries."""
    by_lambda: dict[str, Any] = {}
    for lam in cfg.lambdas:
        labels = [label(o, lam) for o in train_outcomes.values()]
        counts = Counter(labels)
        majority, top = counts.most_common(1)[0]
        chosen = [(o["energy"][c], o["correct"][c]) for o, c in zip(train_outcomes.values(), labels)]
        by_lambda[format_lambda(lam)] = {
            "label_counts": dict(sorted(counts.items())),
            "majority_label": majority,
            "majority_share": top / len(labels),
            "label_mean_energy_j": sum(e for e, _ in chosen) / len(chosen),
            "label_accuracy": sum(k for _, k in chosen) / len(chosen),
        }
    solvable = sum(1 for o in train_outcomes.values() if any(o["correct"].values()))
    return {
        "candidates": spec.candidates,
        "labels": dict(zip(spec.candidates, spec.labels)),
        "energy_source": spec.energy_source,
        "energy_column": energy.column,
        "label_policy": cfg.label_policy,
        "lambdas": list(cfg.lambdas),
        "scaffold_tasks": sorted(spec.scaffolds),
        "n_train_queries": len(train_outcomes),
        "n_train_solvable": solvable,
        "n_train_rows": len(train_rows),
        "n_val_rows": len(val_rows),
        "by_lambda": by_lambda,
    }
