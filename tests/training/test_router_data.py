"""router_data: label policies on hand-made profiles, dataset formats, TRAIN-only statistics."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import ENERGY_J, toy_tables

from jouleroute.training.config import RouterDataConfig
from jouleroute.routing.lm.spec import RouterSpec
from jouleroute.training.rewards import parse_choice
from jouleroute.training.router_data import run_router_data
from jouleroute.routing.scores import normalize_energy as normalize_energy_rows
from jouleroute.routing.scores import normalize_energy_map as normalize_energy
from jouleroute.routing.utility import cheapest_correct_label, expected_utility_label, utility_label

CANDS = ["large", "mid", "small"]


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- label policies on single queries (hand-computed) -------------------------------

def test_normalizations_by_hand():
    energy = {"a": 2.0, "b": 4.0, "c": 8.0}
    assert normalize_energy(energy, "max") == pytest.approx({"a": 0.25, "b": 0.5, "c": 1.0})
    assert normalize_energy(energy, "linear") == pytest.approx({"a": 0.0, "b": 1 / 3, "c": 1.0})
    assert normalize_energy(energy, "log") == pytest.approx({"a": 0.0, "b": 0.5, "c": 1.0})  # powers of 2
    assert normalize_energy({"a": 3.0, "b": 3.0}, "linear") == {"a": 0.0, "b": 0.0}
    with pytest.raises(ValueError, match="valid: max, linear, log"):
        normalize_energy(energy, "rank")


@pytest.mark.parametrize("how", ["max", "linear", "log"])
def test_negative_energy_counts_as_zero_for_labels_and_routers_alike(how):
    # An idle-subtracted energy can fall below 0; labels (one query as a dict) and routers
    # (rows of an array) must agree on what it costs: nothing, never less.
    energy = {"a": -0.5, "b": 0.0, "c": 2.0, "d": 8.0}
    as_zero = {**energy, "a": 0.0}
    assert normalize_energy(energy, how) == pytest.approx(normalize_energy(as_zero, how))
    rows = normalize_energy_rows([list(energy.values()), list(as_zero.values())], how)
    assert rows[0].tolist() == pytest.approx(list(normalize_energy(energy, how).values()))
    assert rows[0].tolist() == pytest.approx(rows[1].tolist())
    with pytest.raises(ValueError, match="NaN or infinity"):
        normalize_energy({"a": float("nan"), "b": 1.0}, how)


def test_cheapest_correct_and_its_fallbacks():
    energy = {"small": 1.0, "mid": 5.0, "large": 20.0}
    assert cheapest_correct_label({"small": 0, "mid": 1, "large": 1}, energy, CANDS, "cheapest") == "mid"
    nobody = {"small": 0, "mid": 0, "large": 0}
    assert cheapest_correct_label(nobody, energy, CANDS, "cheapest") == "small"
    task_acc = {"small": 0.2, "mid": 0.7, "large": 0.7}  # tie on accuracy -> lower mean energy wins
    mean_e = {"small": 1.0, "mid": 5.0, "large": 20.0}
    assert cheapest_correct_label(nobody, energy, CANDS, "most_accurate_on_task", task_acc, mean_e) == "mid"


def test_utility_label_moves_to_cheaper_candidates_as_lambda_rises():
    correct = {"small": 0, "mid": 1, "large": 1}
    energy = {"small": 1.0, "mid": 5.0, "large": 20.0}
    # max-norm: small .05, mid .25, large 1. λ=0: mid/large tie at 1 -> cheaper mid.
    assert utility_label(correct, energy, 0.0, "max", CANDS) == "mid"
    # λ=1: mid 0.75, small -0.05, large 0 -> mid. λ=5: mid -0.25 < small -0.25? equal -> cheaper small
    assert utility_label(correct, energy, 1.0, "max", CANDS) == "mid"
    assert utility_label(correct, energy, 5.0, "max", CANDS) == "small"
    assert utility_label({"small": 0, "mid": 0, "large": 1}, energy, 0.0, "max", CANDS) == "large"
    assert utility_label({"small": 0, "mid": 0, "large": 1}, energy, 2.0, "max", CANDS) == "small"


@pytest.mark.parametrize("norm", ["max", "linear", "log"])
def test_below_lambda_one_utility_is_cheapest_correct(norm):
    """Why the default λ grid goes above 1: below it the utility label cannot trade accuracy away."""
    import random

    rng = random.Random(7)
    for _ in range(300):
        correct = {c: rng.randint(0, 1) for c in CANDS}
        energy = {c: rng.uniform(0.5, 100.0) for c in CANDS}
        lam = rng.uniform(0.0, 1.0)
        expected = cheapest_correct_label(correct, energy, CANDS, "cheapest")
        assert utility_label(correct, energy, lam, norm, CANDS) == expected


def test_expected_utility_shrinks_the_outcome_toward_the_task_prior():
    energy = {"small": 1.0, "mid": 5.0, "large": 20.0}  # max-norm: .05, .25, 1
    prior = {"small": 0.3, "mid": 0.5, "large": 0.9}
    only_small = {"small": 1, "mid": 0, "large": 0}
    # k=0 is the utility label: small was right, so small
    assert expected_utility_label(only_small, energy, 0.0, "max", CANDS, prior, 0.0) == "small"
    # k=4, λ=0: small (1 + 4·.3)/5 = .44, mid 2/5 = .40, large 3.6/5 = .72 -> large
    assert expected_utility_label(only_small, energy, 0.0, "max", CANDS, prior, 4.0) == "large"
    # k=4, λ=0.5: small .44 - .025 = .415, mid .40 - .125 = .275, large .72 - .5 = .22 -> small
    assert expected_utility_label(only_small, energy, 0.5, "max", CANDS, prior, 4.0) == "small"
    # below λ=1 the label moves with λ (the 0/1 utility label cannot): nobody right, k=1
    nobody = {"small": 0, "mid": 0, "large": 0}
    # λ=0: .15 / .25 / .45 -> large; λ=0.3: .135 / .175 / .15 -> mid
    assert expected_utility_label(nobody, energy, 0.0, "max", CANDS, prior, 1.0) == "large"
    assert expected_utility_label(nobody, energy, 0.3, "max", CANDS, prior, 1.0) == "mid"
    with pytest.raises(ValueError, match="prior_strength"):
        expected_utility_label(nobody, energy, 0.0, "max", CANDS, prior, -1.0)


def test_expected_utility_stage_uses_leave_one_out_train_priors(tmp_path):
    profile, queries = toy_tables({"train": 2, "val": 1, "test": 1})
    # make one train 'hard' query unanswered by everyone: its prior must not count itself
    hard = profile["query_id"] == "toy/train-hard-0"
    profile.loc[hard, "correct"] = 0
    cfg = RouterDataConfig(label_policy="expected_utility", prior_strength=1e6, lambdas=(0.0,))
    run_router_data(profile, queries, cfg, tmp_path)
    rows = {r["query_id"]: r for r in read(tmp_path / "train.jsonl")}
    # the task 'arith' (k even) train queries: easy-0, medium-0, hard-0. Leaving hard-0 out,
    # every candidate's prior comes from easy-0 and medium-0: small .5, mid 1, large 1 -> mid
    assert rows["toy/train-hard-0"]["labels"]["0"] == "mid"
    val = {(r["query_id"], r["lam"]): r for r in read(tmp_path / "val.jsonl")}
    # val priors use every train query of the task: small 1/3, mid 2/3, large 2/3; the tie
    # between mid and large is broken by the query's own outcome (only large was right)
    assert val[("toy/val-hard-0", 0.0)]["label"] == "large"
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["label_policy"] == "expected_utility" and stats["lambdas"] == [0.0]


# --- the stage -----------------------------------------------------------------------

def test_stage_writes_datasets_from_train_only(tmp_path):
    profile, queries = toy_tables()
    stats = run_router_data(profile, queries, RouterDataConfig(lambdas=(0.0, 2.0)), tmp_path)
    train, val = read(tmp_path / "train.jsonl"), read(tmp_path / "val.jsonl")
    train_ids = set(queries.loc[queries.split == "train", "query_id"])
    assert {r["query_id"] for r in train} == train_ids and len(train) == len(train_ids)
    assert {r["query_id"] for r in val} == set(queries.loc[queries.split == "val", "query_id"])
    assert len(val) == stats["n_val_rows"] == 2 * (queries.split == "val").sum()
    row = train[0]
    assert set(row["labels"]) == {"0", "2"}  # one label per trained λ
    assert set(row["correct_by_candidate"]) == set(row["energy_by_candidate"]) == set(ENERGY_J)
    assert stats["candidates"] == CANDS and stats["energy_source"] == "estimated"
    spec = RouterSpec.load(tmp_path)
    assert spec.labels == ["A", "B", "C"] and spec.lambdas == [0.0, 2.0]


def test_test_split_never_reaches_any_output(tmp_path):
    profile, queries = toy_tables()
    test_ids = set(queries.loc[queries.split == "test", "query_id"])
    # poison the test rows: if they were read, accuracy and energy stats would change
    poisoned = profile.copy()
    poisoned.loc[poisoned.split == "test", "energy_j"] = 1e9
    run_router_data(poisoned, queries, RouterDataConfig(), tmp_path)
    text = "".join((tmp_path / name).read_text() for name in ("train.jsonl", "val.jsonl", "router_spec.json"))
    assert not any(qid in text for qid in test_ids)
    spec = RouterSpec.load(tmp_path)
    assert spec.pool_energy_j["large"] == pytest.approx(20.0)


def test_shared_prompt_scaffold_is_learned_on_train_and_stored_in_the_spec(tmp_path):
    profile, queries = toy_tables()
    shot = "Example: a solved question about nothing in particular.\nAnswer: 42\n\n"
    queries = queries.assign(question=shot + queries.question)
    run_router_data(profile, queries, RouterDataConfig(), tmp_path)
    spec = RouterSpec.load(tmp_path)
    assert spec.scaffolds["arith"]["prefix"].startswith("Example:")
    assert spec.query_text(shot + "A hard one?", "arith") == "A hard one?"
    run_router_data(profile, queries, RouterDataConfig(strip_scaffold=False), tmp_path / "off")
    assert RouterSpec.load(tmp_path / "off").scaffolds == {}


def test_label_energy_decreases_as_lambda_rises(tmp_path):
    profile, queries = toy_tables()
    stats = run_router_data(profile, queries, RouterDataConfig(lambdas=(0.0, 0.5, 2.0, 8.0)), tmp_path)
    energies = [stats["by_lambda"][k]["label_mean_energy_j"] for k in ("0", "0.5", "2", "8")]
    assert energies == sorted(energies, reverse=True) and energies[0] > energies[-1]
    assert stats["by_lambda"]["0"]["label_accuracy"] == 1.0  # every toy query has a right answer


def test_cheapest_correct_ignores_lambda(tmp_path):
    profile, queries = toy_tables()
    cfg = RouterDataConfig(label_policy="cheapest_correct", lambdas=(0.0, 0.5, 2.0))
    run_router_data(profile, queries, cfg, tmp_path)
    for row in read(tmp_path / "train.jsonl"):
        assert len(set(row["labels"].values())) == 1
        if "hard" in row["question"]:
            assert row["labels"]["0"] == "large"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p, q: p.assign(energy_j=p.energy_j.where(p.index != 3, float("nan"))), "row 3 .*energy_j"),
        (lambda p, q: p.assign(correct=p.correct.where(p.index != 5, 2)), "row 5 .*'correct'"),
        (lambda p, q: p.drop(index=0), "lack some candidate"),
        (lambda p, q: pd.concat([p, p.iloc[[0]]]), "duplicate"),
        (lambda p, q: p.assign(energy_source=p.energy_source.where(p.index != 0, "measured-nvml")), "mixes"),
        (lambda p, q: p.drop(columns=["correct"]), "lacks column"),
    ],
)
def test_bad_profiles_fail_with_a_clear_message(tmp_path, mutate, message):
    profile, queries = toy_tables()
    with pytest.raises(ValueError, match=message):
        run_router_data(mutate(profile, queries), queries, RouterDataConfig(), tmp_path)


def test_query_table_must_agree_with_the_profile(tmp_path):
    profile, queries = toy_tables()
    moved = queries.assign(split=queries.split.where(queries.index != 0, "val"))
    with pytest.raises(ValueError, match="field 'split'"):
        run_router_data(profile, moved, RouterDataConfig(), tmp_path)
    with pytest.raises(ValueError, match="not in the query table"):
        run_router_data(profile, queries.iloc[1:], RouterDataConfig(), tmp_path)


def test_parse_choice_is_strict():
    assert parse_choice(" small. ", CANDS) == "small"
    assert parse_choice([{"role": "assistant", "content": "`mid`"}], CANDS) == "mid"
    for bad in ("small or mid", "Small", "", None, 3):
        assert parse_choice(bad, CANDS) is None


def test_val_queries_can_be_capped_without_touching_the_training_rows(tmp_path):
    profile, queries = toy_tables({"train": 4, "val": 4, "test": 1})
    run_router_data(profile, queries, RouterDataConfig(), tmp_path / "all")
    run_router_data(profile, queries, RouterDataConfig(max_val_queries=5), tmp_path / "capped")
    capped = read(tmp_path / "capped" / "val.jsonl")
    assert len({r["query_id"] for r in capped}) == 5
    assert len({r["query_id"] for r in read(tmp_path / "all" / "val.jsonl")}) == 12
    assert read(tmp_path / "capped" / "train.jsonl") == read(tmp_path / "all" / "train.jsonl")
