"""The first and final model and the agreement chain, each chosen on selection data (train + val) by a rule.

- **final**: the best single on selection (``evaluation.deployed.pick_singles``: most accurate, ties cheaper);
- **cheap**: the candidates whose selection J/query is at most ``cheap_share`` of the final's;
- **first** (the verifier's first stage): the most accurate cheap candidate (ties cheaper);
- **agreement chain**: ``a+b > final`` over every pair of cheap candidates, the most accurate on selection (ties
  cheaper): the cascade's own rule (two cheap answers agree, else ask the final), at about one extra cheap call.

No test outcome is read here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.best_single import best_single
from jouleroute.policy.singles import best_column

from experiments.cascade_verifier.config import VerifierConfig


@dataclass(frozen=True)
class Stages:
    first: str
    final: str
    cheap: tuple[str, ...]
    agreement: Chain
    selection: dict  # each choice's selection figures


def choose_stages(selection: CascadeMatrix, cfg: VerifierConfig) -> Stages:
    """The choices above on the selection matrix (train + val queries every candidate answered)."""
    acc, joules = selection.correct.mean(axis=0), selection.energy_j.mean(axis=0)
    figures = {c: {"accuracy": float(a), "j_per_query": float(j)} for c, a, j in zip(selection.candidates, acc, joules)}
    final = cfg.final or selection.candidates[best_column(selection.correct, selection.energy_j)]
    bound = cfg.cheap_share * figures[selection.candidates[selection.column(final)]]["j_per_query"]
    cheap = tuple(c for c in selection.candidates if c != final and figures[c]["j_per_query"] <= bound)
    if cfg.first is None and not cheap:
        raise ValueError(f"no candidate costs at most {cfg.cheap_share:g} x {final}'s J/query on selection; "
                         "raise cheap_share or name `first`")
    first = cfg.first or cheap[best_single([figures[c]["accuracy"] for c in cheap],
                                               [figures[c]["j_per_query"] for c in cheap])]
    if first == final:
        raise ValueError(f"first and final are both {final!r}: a verifier needs two models")
    pairs = [Chain(((a, b), (final,))) for a, b in itertools.combinations(cheap, 2)]
    if not pairs:
        raise ValueError(f"the agreement chain needs two cheap candidates; cheap on selection: {list(cheap)}")
    scored = [(chain, simulate(chain, selection)) for chain in pairs]
    chain, outcome = scored[best_single([o.accuracy for _, o in scored], [o.j_per_query for _, o in scored])]
    best_j = figures[final]["j_per_query"]
    return Stages(first, final, cheap, chain, {
        "n_queries": len(selection.query_ids), "singles": figures, "cheap_share": cfg.cheap_share,
        "agreement_candidates": [{"chain": c.name, "accuracy": o.accuracy, "j_per_query": o.j_per_query,
                                  "energy_share_of_final": o.j_per_query / best_j} for c, o in scored],
        "agreement": {"chain": chain.name, "accuracy": outcome.accuracy, "j_per_query": outcome.j_per_query,
                      "energy_share_of_final": outcome.j_per_query / best_j,
                      "escalated_share": float(np.mean(outcome.stopped_at == 1))},
    })
