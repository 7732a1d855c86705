"""Per-query utility, and the label policies built on it (normalization: ``routing.scores``).

The SFT labels and the GRPO rewards use the same definitions, so the label of a
query at weight λ is exactly the candidate the GRPO reward ranks highest:

    utility(c, λ) = correct(c) − λ · norm_energy(c)

where ``norm_energy`` rescales the query's candidate energies to [0, 1]:

* ``max``:    e / max(e)
* ``linear``: (e − min(e)) / (max(e) − min(e))
* ``log``:    the same min-max, on ln(max(e, 1e-9 J)); energies across a pool span orders
              of magnitude, and ``log`` keeps the small models apart.
"""

from __future__ import annotations

from typing import Mapping

from jouleroute.routing.scores import best_of, normalize_energy_map, utility


def _energy_order(energy: Mapping[str, float], candidates: list[str]) -> dict[str, tuple[float, int]]:
    # Ties break toward lower energy, then toward the pool's declared order: deterministic.
    return {c: (float(energy[c]), i) for i, c in enumerate(candidates)}


def utilities(correct: Mapping[str, float], energy: Mapping[str, float], lam: float, norm: str) -> dict[str, float]:
    """correct(c) − λ · norm_energy(c) for every candidate of one query."""
    normed = normalize_energy_map({c: float(e) for c, e in energy.items()}, norm)
    return {c: float(utility(float(correct[c]), normed[c], lam)) for c in normed}


def utility_label(
    correct: Mapping[str, int], energy: Mapping[str, float], lam: float, norm: str, candidates: list[str]
) -> str:
    """argmax_c correct(c) − λ · norm_energy(c); ties go to the cheaper candidate."""
    scores = utilities(correct, {c: energy[c] for c in candidates}, lam, norm)
    order = _energy_order(energy, candidates)
    return best_of({c: scores[c] for c in candidates}, order)  # float noise (1 − 0.1·x) never breaks a tie


def shrunk_correct(correct: float, prior: float, strength: float) -> float:
    """p̂ = (correct + k · prior) / (1 + k): one outcome shrunk toward a prior worth ``k = strength`` observations
    (the posterior mean of a Beta prior centred on ``prior``); the labels', router_data's and GRPO's rewards'."""
    return (float(correct) + strength * float(prior)) / (1.0 + strength)


def expected_utility_label(
    correct: Mapping[str, int],
    energy: Mapping[str, float],
    lam: float,
    norm: str,
    candidates: list[str],
    prior: Mapping[str, float],
    prior_strength: float,
) -> str:
    """argmax_c p̂(c) − λ · norm_energy(c), with p̂ the query's own outcome shrunk toward a prior.

    ``p̂(c) = (correct(c) + k · prior(c)) / (1 + k)``: the posterior mean of a Beta prior with
    ``k = prior_strength`` pseudo-observations centred on ``prior(c)`` (the candidate's TRAIN
    accuracy on the query's task) after one observation. One observation is a noisy estimate
    of whether c answers this kind of query: ``utility_label`` (k = 0) trusts it fully and
    labels "cheapest correct", which a router cannot predict on unseen queries; as k grows
    the label moves toward the candidate a router *can* predict, the task's best trade-off.
    Unlike the 0/1 utility, p̂ is continuous, so the label moves with λ below 1 too.
    """
    if prior_strength < 0:
        raise ValueError(f"prior_strength must be >= 0, got {prior_strength}")
    normed = normalize_energy_map({c: energy[c] for c in candidates}, norm)
    order = _energy_order(energy, candidates)
    k = float(prior_strength)

    def score(c: str) -> float:
        return utility(shrunk_correct(correct[c], prior[c], k), normed[c], lam)

    return best_of({c: score(c) for c in candidates}, order)


def cheapest(energy: Mapping[str, float], candidates: list[str]) -> str:
    order = _energy_order(energy, candidates)
    return min(candidates, key=lambda c: order[c])


def cheapest_correct_label(
    correct: Mapping[str, int],
    energy: Mapping[str, float],
    candidates: list[str],
    fallback: str,
    task_accuracy: Mapping[str, float] | None = None,
    mean_energy: Mapping[str, float] | None = None,
) -> str:
    """Lowest-energy candidate that answered correctly; ``fallback`` when none did.

    With an expected correctness in [0, 1], "answered correctly" means the highest expectation (> 0)
    of the query's candidates; on 0/1 outcomes the two readings are the same.

    ``fallback="cheapest"``: the query's cheapest candidate (nobody gets it right, so
    spend as little as possible). ``fallback="most_accurate_on_task"``: the candidate
    with the best TRAIN accuracy on the query's task (ties: lower mean energy), betting
    that the profile's miss was noise.
    """
    top = max(float(correct[c]) for c in candidates)  # an expected correctness: the most likely right ones
    right = [c for c in candidates if top > 0 and float(correct[c]) >= top - 1e-12]
    if right:
        return cheapest(energy, right)
    if fallback == "cheapest":
        return cheapest(energy, candidates)
    if fallback == "most_accurate_on_task":
        if task_accuracy is None or mean_energy is None:
            raise ValueError("fallback 'most_accurate_on_task' needs task_accuracy and mean_energy")
        return max(candidates, key=lambda c: (task_accuracy.get(c, 0.0), -mean_energy[c], -candidates.index(c)))
    raise ValueError(f"unknown fallback '{fallback}'; valid: cheapest, most_accurate_on_task")
