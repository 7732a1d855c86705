"""Score a chosen chain once on test against the best single, with paired-bootstrap intervals.

The chain and the best single were both chosen on selection data (``search.choose_chain``; the best single by
``evaluation.deployed``); here they meet the test queries once. Figures, per test query resampled with one paired
draw (``stats.resample_index``) for every figure:

- accuracy and J/query of the chain and of the best single;
- ``accuracy_diff_vs_best`` (chain − best single) and its interval: the chain beats the best single when the
  interval lies above 0;
- ``energy_share_of_best`` (the chain's J/query over the best single's) and its interval;
- the latency (sum of each reached stage's slowest member) and the share of queries that stopped at each stage;
- the energy sources of every call, so a figure mixing measured and modelled joules says so.

``decision_figure`` is the one figure a user decides by: the most accurate chain at or below the best single's
energy on selection (``energy_share: 1.0``), scored here.
"""

from __future__ import annotations

import numpy as np

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.cascade.search import ChainSpace, choose_chain
from jouleroute.cascade.target import CascadeTarget
from jouleroute.stats import CONFIDENCE, SAMPLES, SEED, percentile_interval, resample_index


def verdict(ci: list[float] | None) -> str:
    """"above", "below" or "tie" with the best single, read off the accuracy difference's interval."""
    if ci is None:
        return "untested"
    return "above" if ci[0] > 0 else "below" if ci[1] < 0 else "tie"


def score_chain(chain: Chain, test: CascadeMatrix, best: str, samples: int = SAMPLES,
                confidence: float = CONFIDENCE, seed: int = SEED) -> dict:
    """The chain and the best single (``best``, chosen on selection) on the test matrix (module doc)."""
    outcome = simulate(chain, test)
    column = test.column(best)
    best_correct, best_energy = test.correct[:, column], test.energy_j[:, column]
    values = np.stack([outcome.correct, outcome.energy_j, best_correct, best_energy], axis=1)
    means = values.mean(axis=0, keepdims=True)
    if samples > 0:
        means = np.vstack([means, values[resample_index(len(values), samples, seed)].mean(axis=1)])
    acc, joules, best_acc, best_j = means.T
    with np.errstate(divide="ignore", invalid="ignore"):
        figures = {"accuracy_diff_vs_best": acc - best_acc, "energy_share_of_best": joules / best_j}
    out: dict = {"chain": chain.name, "stages": [list(s) for s in chain.stages],
                 "max_output_tokens": chain.max_output_tokens, "accuracy": float(acc[0]),
                 "j_per_query": float(joules[0]),
                 "latency_s": float(outcome.latency_s.mean()), "stop_share": outcome.stop_share(),
                 "best_single": {"candidate": best, "accuracy": float(best_acc[0]), "j_per_query": float(best_j[0])},
                 "energy_sources": sorted(outcome.sources), "n_queries": len(values), "samples": samples,
                 "confidence": confidence}
    for name, series in figures.items():
        out[name] = float(series[0]) if np.isfinite(series[0]) else None
        finite = series[1:][np.isfinite(series[1:])]
        out[f"{name}_ci"] = percentile_interval(finite, confidence) if finite.size else None
    out["verdict"] = verdict(out["accuracy_diff_vs_best_ci"])
    return out


DECISION_TARGET = CascadeTarget(energy_share=1.0)


def decision_figure(space: ChainSpace, selection: CascadeMatrix, test: CascadeMatrix, samples: int = SAMPLES,
                    confidence: float = CONFIDENCE, seed: int = SEED) -> dict:
    """The most accurate chain at or below the best single's energy (chosen on selection), scored on test."""
    choice = choose_chain(space, selection, DECISION_TARGET, samples=0)
    return {"selection": choice.selection,
            "test": score_chain(choice.chain, test, space.candidates[space.best], samples, confidence, seed)}
