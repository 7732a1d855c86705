"""Always-X, random-at-a-mix, oracle, the decision rule, the registry and the config."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from jouleroute.routing.base import RoutingDecisions
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.families import family_names, learned_families, router_families
from jouleroute.routing.registry import baseline_names, build_router
from jouleroute.routing.scores import Scores, normalize_energy
from jouleroute.routing.baselines.simple import AlwaysRouter, OracleRouter, RandomRouter, mix_of
from jouleroute.routing.baselines.train_table import build_train_table

POOL = ["a", "b", "c"]


def _queries(n: int) -> pd.DataFrame:
    return pd.DataFrame({"query_id": [f"t/{i}" for i in range(n)], "question": [f"question {i}" for i in range(n)]})


# Hand-made outcomes; energies a < b < c except q3, where b is cheapest.
ORACLE_ROWS = [
    # query, candidate, correct, energy_j
    ("q0", "a", 1, 1.0), ("q0", "b", 1, 2.0), ("q0", "c", 1, 5.0),  # all right -> cheapest: a
    ("q1", "a", 0, 1.0), ("q1", "b", 1, 2.0), ("q1", "c", 1, 5.0),  # a wrong -> b
    ("q2", "a", 0, 1.0), ("q2", "b", 0, 2.0), ("q2", "c", 1, 5.0),  # only c right -> c
    ("q3", "a", 0, 1.5), ("q3", "b", 0, 0.5), ("q3", "c", 0, 5.0),  # none right -> cheapest: b
    ("q4", "a", 0, 1.0), ("q4", "c", 1, 5.0),  # b never ran here -> c
]
ORACLE_PROFILE = pd.DataFrame(ORACLE_ROWS, columns=["query_id", "candidate_id", "correct", "energy_j"])


def test_always_sends_everything_to_one_candidate():
    decisions = AlwaysRouter("b", POOL).route(_queries(4))
    assert decisions.candidate_ids == ["b"] * 4
    assert decisions.overhead_energy_j == [0.0] * 4 and decisions.overhead_energy_source == "none"
    with pytest.raises(ValueError, match="not in the pool"):
        AlwaysRouter("z", POOL)


def test_random_matches_the_mix_and_is_seeded():
    mix = {"a": 0.5, "b": 0.3, "c": 0.2}
    queries = _queries(1000)
    decisions = RandomRouter(mix, seed=7).route(queries)
    counts = Counter(decisions.candidate_ids)
    assert {c: counts[c] for c in mix} == {"a": 500, "b": 300, "c": 200}
    assert decisions.candidate_ids == RandomRouter(mix, seed=7).route(queries).candidate_ids
    assert decisions.candidate_ids != RandomRouter(mix, seed=8).route(queries).candidate_ids
    # Not a block of a's then b's: the assignment is shuffled.
    assert set(decisions.candidate_ids[:50]) == {"a", "b", "c"}


def test_random_mix_rounds_to_within_one_query():
    mix = {"a": 1, "b": 1, "c": 1}  # shares are normalized
    counts = Counter(RandomRouter(mix, seed=0).route(_queries(7)).candidate_ids)
    assert sorted(counts.values()) == [2, 2, 3]


@pytest.mark.parametrize("mix", [{"a": -0.1, "b": 1.0}, {"a": 0.0}, {"a": float("nan")}])
def test_random_rejects_bad_mixes(mix):
    with pytest.raises(ValueError, match="mix shares"):
        RandomRouter(mix)


def test_mix_of_feeds_the_random_router():
    decisions = RoutingDecisions(["1", "2", "3", "4"], ["a", "a", "b", "a"])
    assert mix_of(decisions) == {"a": 0.75, "b": 0.25}


def test_oracle_matches_hand_computed_choices():
    decisions = OracleRouter(ORACLE_PROFILE, POOL).route(pd.DataFrame({"query_id": ["q3", "q0", "q2", "q1", "q4"]}))
    assert decisions.candidate_ids == ["b", "a", "c", "b", "c"]
    assert decisions.overhead_energy_source == "none"


def test_oracle_refuses_queries_it_has_no_outcomes_for():
    with pytest.raises(ValueError, match="no profile rows for 1 routed queries"):
        OracleRouter(ORACLE_PROFILE).route(pd.DataFrame({"query_id": ["q0", "q9"]}))


def test_oracle_rejects_repeated_rows():
    with pytest.raises(ValueError, match=r"repeated .* \(q0, a\)"):
        OracleRouter(pd.concat([ORACLE_PROFILE, ORACLE_PROFILE.iloc[:1]], ignore_index=True))


def test_normalize_energy_formulas():
    e = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    assert np.allclose(normalize_energy(e, "max"), [[0.25, 0.5, 1.0], [1.0, 1.0, 1.0]])
    assert np.allclose(normalize_energy(e, "linear"), [[0.0, 1 / 3, 1.0], [0.0, 0.0, 0.0]])
    assert np.allclose(normalize_energy(e, "log"), [[0.0, 0.5, 1.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="unknown energy normalization"):
        normalize_energy(e, "rank")


def _choose(p, e, lam, norm="max"):
    return Scores.from_energy([f"q{i}" for i in range(len(p))], POOL, np.array(p), np.array(e), norm).choices(lam)


def test_choose_trades_correctness_for_energy():
    p = np.array([[0.2, 0.6, 0.9], [0.9, 0.9, 0.9]])
    e = np.array([[1.0, 2.0, 10.0], [5.0, 1.0, 2.0]])
    assert _choose(p, e, 0.0).tolist() == [2, 1]  # most likely right; a tie goes to the cheaper
    assert _choose(p, e, 0.5).tolist() == [1, 1]  # 0.6 - 0.1 beats 0.9 - 0.5
    assert _choose(p, e, 1e6).tolist() == [0, 1]  # cheapest
    with pytest.raises(ValueError, match="λ must be"):
        _choose(p, e, -1.0)


def test_scores_check_shapes():
    with pytest.raises(ValueError, match="merit has shape"):
        Scores(["q"], POOL, np.zeros((1, 2)), np.ones((1, 3)), np.ones((1, 3)))


def test_the_family_table_holds_the_built_in_families_in_report_order():
    assert family_names() == ("always", "random", "oracle", "knn", "mlp", "mf", "task_best")
    assert learned_families() == ("knn", "mlp", "mf")
    assert {n: f.config is not None for n, f in router_families().items()} == {
        "always": False, "random": False, "oracle": False, "knn": True, "mlp": True, "mf": True, "task_best": False}


def test_unknown_router_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown router 'bert'; valid: always, random, oracle, knn, mlp, mf, task_best"):
        build_router("bert", ORACLE_PROFILE, _queries(1), POOL, BaselinesConfig())


def test_build_simple_routers_by_name():
    cfg = BaselinesConfig(seed=3)
    queries = pd.DataFrame({"query_id": ["q0", "q1"]})
    assert build_router("always:c", ORACLE_PROFILE, queries, POOL, cfg).route(queries).candidate_ids == ["c", "c"]
    oracle = build_router("oracle", ORACLE_PROFILE, queries, POOL, cfg, eval_profile=ORACLE_PROFILE)
    assert oracle.route(queries).candidate_ids == ["a", "b"]
    random = build_router("random", ORACLE_PROFILE, queries, POOL, cfg, mix={"a": 1.0})
    assert random.route(queries).candidate_ids == ["a", "a"] and random.seed == 3
    assert build_router("random", ORACLE_PROFILE, queries, POOL, cfg).mix == {c: 1 / 3 for c in POOL}


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("always", {}, "needs a candidate"),
        ("always:z", {}, "not in the pool"),
        ("oracle", {}, "needs eval_profile"),
        ("knn:5", {}, "takes no"),
        ("random", {"mix": {"z": 1.0}}, "outside the pool"),
    ],
)
def test_build_router_explains_bad_requests(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_router(name, ORACLE_PROFILE, _queries(1), POOL, BaselinesConfig(), **kwargs)


def test_baseline_names_expand_always_per_candidate():
    assert baseline_names(["always", "oracle", "knn"], POOL) == ["always:a", "always:b", "always:c", "oracle", "knn"]


def test_config_rejects_unknown_and_repeated_keys():
    assert BaselinesConfig().families == family_names()
    with pytest.raises(ValidationError, match="kk"):
        BaselinesConfig.model_validate({"knn": {"kk": 3}})
    with pytest.raises(ValidationError, match="listed twice"):
        BaselinesConfig(families=("knn", "knn"))
    with pytest.raises(ValidationError, match="unknown router families"):
        BaselinesConfig(families=("bert",))
    with pytest.raises(ValidationError, match="greater than 0") as info:
        BaselinesConfig.model_validate({"knn": {"k": 0}})
    assert info.value.errors()[0]["loc"] == ("knn", "k")  # the family's section names where it failed
    with pytest.raises(ValidationError, match="energy_norm"):  # the norm is energy_policy's (one for every stage)
        BaselinesConfig(energy_norm="max")


TRAIN = pd.DataFrame(
    {
        "query_id": ["q0", "q0", "q1", "q1"], "candidate_id": ["a", "b", "a", "b"], "split": ["train"] * 4,
        "correct": [1, 0, 1, 1], "energy_j": [1.0, 2.0, 1.5, 2.5], "energy_source": ["estimated"] * 4,
    }
)
TRAIN_QUERIES = pd.DataFrame({"query_id": ["q0", "q1"], "question": ["x", "y"]})


def test_train_table_pivots_outcomes():
    table = build_train_table(TRAIN, TRAIN_QUERIES, ["a", "b"])
    assert table.query_ids == ["q0", "q1"] and table.texts == ["x", "y"]
    assert table.correct.tolist() == [[1.0, 0.0], [1.0, 1.0]]
    assert table.candidate_mean_energy_j().tolist() == [1.25, 2.25]
    assert table.energy_source == "estimated"


@pytest.mark.parametrize(
    "profile, queries, message",
    [
        (TRAIN.drop(columns="energy_j"), TRAIN_QUERIES, r"profile lacks columns \['energy_j'\]"),
        (TRAIN.assign(correct=[1, 0, 2, 1]), TRAIN_QUERIES, "profile row 2: field 'correct' is 2"),
        (TRAIN.assign(energy_j=[1.0, None, 1.0, 1.0]), TRAIN_QUERIES, "profile row 1: field 'energy_j'"),
        (TRAIN, TRAIN_QUERIES.iloc[:1], r"missing from the query table \(first: \['q1'\]\)"),
        (TRAIN[TRAIN["candidate_id"] == "a"], TRAIN_QUERIES, r"no 'train' profile rows for candidates \['b'\]"),
        (TRAIN.assign(split="test"), TRAIN_QUERIES, "no rows with split == 'train'"),
    ],
)
def test_train_table_names_the_bad_field(profile, queries, message):
    with pytest.raises(ValueError, match=message):
        build_train_table(profile, queries, ["a", "b"])
