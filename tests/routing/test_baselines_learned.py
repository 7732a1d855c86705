"""The learned baselines (knn, mlp, mf) train and route on a tiny hand-made profile.

Three topics, three candidates: every candidate answers the arithmetic queries,
``mid`` and ``big`` the history ones, only ``big`` the proofs; ``tiny`` costs about
1 J, ``mid`` 3 J, ``big`` 10 J. Questions are embedded with ``HashingEmbedder``
(a real, model-free encoder injected for speed): queries of one topic share words,
so they land close together.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jouleroute.energy.estimate import EstimateMeter
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.baselines.embeddings import EmbeddingCache, HashingEmbedder
from jouleroute.routing.registry import build_router
from tests.routing.helpers import CountingEmbedder

CANDIDATES = ["tiny", "mid", "big"]
BASE_ENERGY_J = {"tiny": 1.0, "mid": 3.0, "big": 10.0}
TOPICS = {
    # topic: (question template, candidates that answer correctly)
    "arith": ("add the numbers {a} plus {b} and give the sum total", {"tiny", "mid", "big"}),
    "history": ("which emperor ruled the roman empire in year {a} history dynasty {b}", {"mid", "big"}),
    "proof": ("prove the theorem that every compact manifold integral {a} bound lemma {b}", {"big"}),
}
CFG = BaselinesConfig(
    embedding={"model": "hashing", "cache_dir": None},
    knn={"k": 5},
    mlp={"hidden_sizes": (32,), "epochs": 60, "lr": 2e-2, "batch_size": 64},
    mf={"dim": 16, "epochs": 40, "lr": 5e-2, "batch_size": 16},
)
LEARNED = ["knn", "mlp", "mf"]


def _tables(n_per_topic: int, split: str, offset: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    queries, rows = [], []
    for topic, (template, right) in TOPICS.items():
        for i in range(offset, offset + n_per_topic):
            qid = f"{topic}/{i}"
            queries.append({"query_id": qid, "task": topic, "split": split, "question": template.format(a=i, b=3 * i)})
            for cand in CANDIDATES:
                energy = BASE_ENERGY_J[cand] * (1.0 + 0.1 * (i % 3))  # some spread per query
                rows.append(
                    {"query_id": qid, "candidate_id": cand, "task": topic, "split": split,
                     "correct": int(cand in right), "energy_j": energy, "energy_net_j": 0.8 * energy,
                     "energy_source": "estimated"}
                )
    return pd.DataFrame(rows), pd.DataFrame(queries)


TRAIN_PROFILE, TRAIN_QUERIES = _tables(12, "train", 0)
TEST_PROFILE, TEST_QUERIES = _tables(3, "test", 100)


@pytest.fixture(scope="module", params=LEARNED)
def router(request):
    return build_router(request.param, TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, CFG, embedder=HashingEmbedder())


def _by_topic(decisions) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for qid, cand in zip(decisions.query_ids, decisions.candidate_ids):
        out.setdefault(qid.split("/")[0], set()).add(cand)
    return out


def test_routes_only_pool_members_in_query_order(router):
    decisions = router.route(TEST_QUERIES)
    assert decisions.query_ids == TEST_QUERIES["query_id"].tolist()
    assert set(decisions.candidate_ids) <= set(CANDIDATES)


def test_lambda_zero_picks_the_most_likely_correct(router):
    scores = router.score(TEST_QUERIES)
    picks = scores.decide(0.0).candidate_ids
    # The argmax of predicted correctness (ties to the cheaper), query by query...
    assert all(scores.merit[i, CANDIDATES.index(c)] == scores.merit[i].max() for i, c in enumerate(picks))
    # ...and it learned the topics: proofs need the big model, history not the tiny one.
    by_topic = _by_topic(scores.decide(0.0))
    assert by_topic["proof"] == {"big"}
    assert "tiny" not in by_topic["history"]


def test_large_lambda_picks_the_cheapest(router):
    scores = router.score(TEST_QUERIES)
    assert scores.decide(1e4).candidate_ids == ["tiny"] * len(TEST_QUERIES)


def test_moderate_lambda_routes_each_topic_to_its_cheapest_capable_candidate(router):
    # 0.2 x normalized energy is below the confidence gap between right and wrong candidates
    # but above the gap between two right ones, so each topic goes to its cheapest solver.
    by_topic = _by_topic(router.score(TEST_QUERIES).decide(0.2))
    assert by_topic == {"arith": {"tiny"}, "history": {"mid"}, "proof": {"big"}}


def test_sweep_reuses_one_prediction(router):
    scores = router.score(TEST_QUERIES)
    sweep = scores.sweep([0.0, 0.2, 1e4])
    assert list(sweep) == [0.0, 0.2, 1e4]
    assert sweep[0.2].candidate_ids == scores.decide(0.2).candidate_ids
    chosen_energy = [np.mean([scores.energy_j[i, CANDIDATES.index(c)] for i, c in enumerate(d.candidate_ids)])
                     for d in sweep.values()]
    assert chosen_energy[0] >= chosen_energy[1] >= chosen_energy[2]


def test_predicted_energy_orders_candidates(router):
    energy = router.score(TEST_QUERIES).energy_j
    assert np.all(energy[:, 0] < energy[:, 1]) and np.all(energy[:, 1] < energy[:, 2])
    assert np.allclose(energy.mean(axis=0), [1.1, 3.3, 11.0], rtol=0.25)


def test_without_meter_overhead_is_zero_and_unsourced(router):
    decisions = router.route(TEST_QUERIES)
    assert decisions.overhead_energy_source == "none"
    assert decisions.overhead_energy_j == [0.0] * len(TEST_QUERIES)
    assert decisions.overhead_latency_s == [0.0] * len(TEST_QUERIES)


@pytest.mark.parametrize("family", LEARNED)
def test_meter_measures_uncached_overhead(family, tmp_path):
    embedder = HashingEmbedder(cache_dir=tmp_path)
    meter = EstimateMeter()
    router = build_router(family, TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, CFG, meter=meter, embedder=embedder)
    decisions = router.route(TEST_QUERIES)
    n = len(TEST_QUERIES)
    assert decisions.overhead_energy_source == "estimated"
    assert len(decisions.overhead_energy_j) == len(decisions.overhead_latency_s) == n
    assert decisions.overhead_latency_s[0] > 0 and len(set(decisions.overhead_latency_s)) == 1
    assert all(e >= 0 for e in decisions.overhead_energy_j)
    # Training filled the cache; the measured routing pass did not read or extend it.
    cached = EmbeddingCache(tmp_path, embedder.model_key).load()
    assert len(cached) == len(TRAIN_QUERIES)


def test_overhead_measured_on_a_sample_changes_no_decision(tmp_path):
    embedder = CountingEmbedder(cache_dir=tmp_path)
    cfg = CFG.model_copy(update={"overhead_sample": 2})
    meter = EstimateMeter()
    metered = build_router("mlp", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, cfg, meter=meter, embedder=embedder)
    embedder.encoded.clear()
    scores = metered.score(TEST_QUERIES)
    # Two test questions embedded uncached inside the window, then all nine through the cache.
    assert len(embedder.encoded) == 2 + len(TEST_QUERIES)
    assert scores.overhead_latency_s[0] > 0 and len(scores.overhead_latency_s) == len(TEST_QUERIES)
    plain = build_router("mlp", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, cfg, embedder=HashingEmbedder())
    assert np.array_equal(scores.merit, plain.score(TEST_QUERIES).merit)


@pytest.mark.parametrize("family", ["mlp", "mf"])
def test_training_is_seeded_and_lowers_the_loss(family):
    make = lambda cfg: build_router(family, TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, cfg, embedder=HashingEmbedder())
    first, again = make(CFG), make(CFG)
    other = make(CFG.model_copy(update={"seed": 1}))
    assert first.loss_history[-1] < 0.5 * first.loss_history[0]
    p = first.score(TEST_QUERIES).merit
    assert np.array_equal(p, again.score(TEST_QUERIES).merit)
    assert not np.array_equal(p, other.score(TEST_QUERIES).merit)


def test_knn_probability_is_the_neighbour_vote():
    knn = build_router("knn", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, CFG, embedder=HashingEmbedder())
    p = knn.score(TEST_QUERIES[TEST_QUERIES["task"] == "history"]).merit
    assert np.allclose(p, [[0.0, 1.0, 1.0]] * 3)  # all 5 neighbours are history queries


def test_missing_pairs_are_masked_not_guessed():
    # Drop every "big" row of the proof topic but one: the learners must still train and route.
    drop = (TRAIN_PROFILE["candidate_id"] == "big") & (TRAIN_PROFILE["task"] == "proof")
    drop &= TRAIN_PROFILE["query_id"] != "proof/0"
    for family in LEARNED:
        router = build_router(family, TRAIN_PROFILE[~drop], TRAIN_QUERIES, CANDIDATES, CFG, embedder=HashingEmbedder())
        scores = router.score(TEST_QUERIES)
        assert np.all(np.isfinite(scores.merit)) and np.all(np.isfinite(scores.energy_j))


def test_unfitted_router_says_so():
    from jouleroute.routing.baselines.knn import KNNRouter

    with pytest.raises(RuntimeError, match="not fitted"):
        KNNRouter(CANDIDATES, HashingEmbedder()).route(TEST_QUERIES)


def test_trains_only_on_the_train_split():
    mixed = pd.concat([TRAIN_PROFILE, TEST_PROFILE])
    queries = pd.concat([TRAIN_QUERIES, TEST_QUERIES])
    router = build_router("knn", mixed, queries, CANDIDATES, CFG, embedder=HashingEmbedder())
    assert router.index.n_samples_fit_ == len(TRAIN_QUERIES)
