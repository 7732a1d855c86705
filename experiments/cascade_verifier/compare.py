"""The verifier chain against the agreement chain at equal energy: operating point on val, one score on test.

**The verifier chain** asks the first model, runs the verifier on the query and that answer, and asks the final
model when the verifier's margin exceeds a threshold. Per query: correctness = the final's when escalated, else
the first's; joules = the first's + the verifier's own (an estimate on this CPU) + the final's when escalated.

**The operating point** is chosen on val (the verifier never trained on it): the threshold that escalates the most
val queries (highest margins first) while the chain's val J/query stays at or below the agreement chain's
selection energy share of the final model's J/query. The agreement chain was itself chosen on selection.

**On test, once**: both chains, the final model alone and two references at the verifier's test escalation rate
(**random**: the same share escalated at random, its expected correctness; **oracle**: the same number escalated
where the final is right and the first wrong, a hindsight bound no verifier can exceed), each per query, with one
paired bootstrap draw (``stats.resample_index``) for every interval. The verdict reads the interval of the
accuracy difference (verifier − agreement): above 0 a win, below a loss, else a tie.
"""

from __future__ import annotations

import numpy as np

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix
from jouleroute.policy.compare import difference_verdict
from jouleroute.stats import percentile_interval, resample_index


def _columns(m: CascadeMatrix, first: str, final: str) -> tuple[np.ndarray, ...]:
    a, b = m.column(first), m.column(final)
    return m.correct[:, a], m.energy_j[:, a], m.correct[:, b], m.energy_j[:, b]


def verifier_chain(m: CascadeMatrix, first: str, final: str, margin: np.ndarray, own_j: np.ndarray,
                   threshold: float) -> dict[str, np.ndarray]:
    """Per query: correctness, joules (every call, the verifier's included) and whether it escalated."""
    c1, e1, c2, e2 = _columns(m, first, final)
    escalated = np.asarray(margin) > threshold
    return {"correct": np.where(escalated, c2, c1), "energy_j": e1 + own_j + escalated * e2,
            "escalated": escalated}


def choose_threshold(val: CascadeMatrix, first: str, final: str, margin: np.ndarray, own_j: np.ndarray,
                     energy_share: float) -> dict:
    """The threshold at the agreement chain's energy share (module doc) and the val figures it gives."""
    _, e1, _, e2 = _columns(val, first, final)
    n = len(margin)
    order = np.argsort(-np.asarray(margin), kind="stable")
    budget = energy_share * e2.mean()
    spent = (e1 + own_j).mean() + np.concatenate([[0.0], np.cumsum(e2[order])]) / n  # J/query escalating top k
    k = int(np.flatnonzero(spent <= budget + 1e-9).max()) if (spent <= budget + 1e-9).any() else 0
    ranked = np.asarray(margin)[order]
    if k == 0:
        threshold = float(ranked[0]) + 1.0  # escalate nothing
    elif k == n:
        threshold = float(ranked[-1]) - 1.0  # escalate everything
    else:
        threshold = float((ranked[k - 1] + ranked[k]) / 2)
    chain = verifier_chain(val, first, final, margin, own_j, threshold)
    return {"threshold": threshold, "target_energy_share": energy_share, "n_queries": n,
            "accuracy": float(chain["correct"].mean()), "j_per_query": float(chain["energy_j"].mean()),
            "energy_share_of_final": float(chain["energy_j"].mean() / e2.mean()),
            "escalated_share": float(chain["escalated"].mean())}


def auc(score: np.ndarray, positive: np.ndarray) -> float | None:
    """Probability that a positive outranks a negative (ties half): how well the margin finds where the first
    model is wrong and the final right. ``None`` with no positive or no negative."""
    score, positive = np.asarray(score, float), np.asarray(positive, bool)
    pos, neg = score[positive], score[~positive]
    if not pos.size or not neg.size:
        return None
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (pos.size * neg.size))


def _oracle(c1: np.ndarray, c2: np.ndarray, count: int) -> np.ndarray:
    """Escalate ``count`` queries where it helps most (final right and first wrong first): hindsight."""
    gain = c2 - c1
    order = np.argsort(-gain, kind="stable")
    take = np.zeros(len(c1), bool)
    take[order[:count]] = True
    return np.where(take, c2, c1)


def compare_on_test(test: CascadeMatrix, agreement: Chain, first: str, final: str, margin: np.ndarray,
                    own_j: np.ndarray, threshold: float, samples: int = 1000, confidence: float = 0.95,
                    seed: int = 0) -> dict:
    """Every figure of the test comparison (module doc), with paired-bootstrap intervals."""
    agree = simulate(agreement, test)
    ver = verifier_chain(test, first, final, margin, own_j, threshold)
    c1, e1, c2, e2 = _columns(test, first, final)
    share = float(ver["escalated"].mean())
    series = {
        "verifier_correct": ver["correct"], "verifier_j": ver["energy_j"],
        "agreement_correct": agree.correct, "agreement_j": agree.energy_j,
        "final_correct": c2, "final_j": e2, "first_correct": c1,
        "random_correct": (1 - share) * c1 + share * c2,
        "oracle_correct": _oracle(c1, c2, int(ver["escalated"].sum())),
    }
    names = list(series)
    values = np.stack([series[k] for k in names], axis=1)
    means = values.mean(axis=0, keepdims=True)
    if samples > 0:
        means = np.vstack([means, values[resample_index(len(values), samples, seed)].mean(axis=1)])
    col = {k: means[:, i] for i, k in enumerate(names)}
    derived = {
        "accuracy_diff_verifier_minus_agreement": col["verifier_correct"] - col["agreement_correct"],
        "j_per_query_diff_verifier_minus_agreement": col["verifier_j"] - col["agreement_j"],
        "verifier_energy_share_of_final": col["verifier_j"] / col["final_j"],
        "agreement_energy_share_of_final": col["agreement_j"] / col["final_j"],
        "accuracy_diff_verifier_minus_random": col["verifier_correct"] - col["random_correct"],
        "accuracy_diff_verifier_minus_final": col["verifier_correct"] - col["final_correct"],
        "accuracy_diff_agreement_minus_final": col["agreement_correct"] - col["final_correct"],
    }
    out: dict = {"n_queries": len(values), "samples": samples, "confidence": confidence, "seed": seed,
                 "verifier": {"accuracy": float(col["verifier_correct"][0]), "j_per_query": float(col["verifier_j"][0]),
                              "escalated_share": share, "own_j_per_query": float(np.mean(own_j)),
                              "auc_first_wrong_final_right": auc(margin, (c1 < c2))},
                 "agreement": {"chain": agreement.name, "accuracy": agree.accuracy, "j_per_query": agree.j_per_query,
                               "escalated_share": float(np.mean(agree.stopped_at == 1)),
                               "energy_sources": sorted(agree.sources)},
                 "final": {"candidate": final, "accuracy": float(c2.mean()), "j_per_query": float(e2.mean())},
                 "first": {"candidate": first, "accuracy": float(c1.mean()), "j_per_query": float(e1.mean())},
                 "random_at_same_share": {"accuracy": float(col["random_correct"][0])},
                 "oracle_at_same_share": {"accuracy": float(col["oracle_correct"][0])}}
    for name, values_ in derived.items():
        out[name] = float(values_[0])
        out[f"{name}_ci"] = percentile_interval(values_[1:], confidence) if samples > 0 else None
    out["verdict"] = difference_verdict(out["accuracy_diff_verifier_minus_agreement_ci"])  # verifier − agreement
    return out
