"""The verifier's two-choice profile and the choices made on selection data (experiments/cascade_verifier)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.cascade_verifier.config import ACCEPT, ESCALATE, VerifierConfig
from experiments.cascade_verifier.derived import NO_ANSWER, derived_tables, verifier_text
from experiments.cascade_verifier.stages import choose_stages
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.evaluation.deployed import selection_matrix
from tests.cascade.pool import synthetic_pool


@pytest.fixture(scope="module")
def pool():
    profile, queries = synthetic_pool(n=200, seed=3)
    return profile, queries.assign(question=[f"What is item {i}?" for i in range(len(queries))])


def test_accept_pays_the_first_call_and_escalate_pays_both(pool):
    profile, queries = pool
    d_profile, d_queries = derived_tables(profile, queries, "cheap_a", "best")
    assert len(d_profile) == 2 * len(queries) and set(d_profile["candidate_id"]) == {ACCEPT, ESCALATE}
    wide = profile.pivot(index="query_id", columns="candidate_id", values="energy_j")
    right = profile.pivot(index="query_id", columns="candidate_id", values="correct")
    got = d_profile.pivot(index="query_id", columns="candidate_id", values="energy_j")
    np.testing.assert_allclose(got[ACCEPT], wide.loc[got.index, "cheap_a"])
    np.testing.assert_allclose(got[ESCALATE], wide.loc[got.index, "cheap_a"] + wide.loc[got.index, "best"])
    won = d_profile.pivot(index="query_id", columns="candidate_id", values="correct")
    np.testing.assert_array_equal(won[ESCALATE], right.loc[won.index, "best"])
    # the text holds the question and the first model's answer (its extracted answer, not the final's)
    row = d_queries.iloc[0]
    answer = profile[(profile.query_id == row.query_id) & (profile.candidate_id == "cheap_a")].extracted_answer.iloc[0]
    assert row.question.startswith("Question: What is item") and row.question.endswith(f"answer: {answer}")
    assert set(d_queries["split"]) == {"train", "val", "test"}


def test_the_text_says_when_no_answer_was_extracted_and_keeps_the_work_tail():
    text = verifier_text("Q?", None, "x" * 50 + "the end", work_chars=10)
    assert text.endswith(NO_ANSWER) and "xxx" + "the end" in text and "x" * 11 not in text


def test_two_energy_sources_are_never_summed(pool):
    profile, queries = pool
    mixed = profile.copy()
    mixed.loc[mixed["candidate_id"] == "best", "energy_source"] = "estimated"
    with pytest.raises(ValueError, match="mix energy sources"):
        derived_tables(mixed, queries, "cheap_a", "best")


def test_stages_are_chosen_on_selection_by_the_stated_rule(pool):
    profile, queries = pool
    selection = cascade_matrix(profile, selection_matrix(profile, queries, "energy_j"))
    stages = choose_stages(selection, VerifierConfig(cheap_share=0.1))  # cheap: J/query <= 2 of best's ~20
    acc = dict(zip(selection.candidates, selection.correct.mean(axis=0)))
    assert stages.final == "best" and set(stages.cheap) == {"cheap_a", "cheap_b"}
    assert stages.first == max(stages.cheap, key=lambda c: acc[c])
    assert stages.agreement.stages == (("cheap_a", "cheap_b"), ("best",))
    with pytest.raises(ValueError, match="no candidate costs at most"):
        choose_stages(selection, VerifierConfig(cheap_share=0.001))


def test_choices_do_not_read_test_outcomes(pool):
    profile, queries = pool
    flipped = profile.copy()
    test = flipped["split"] == "test"
    flipped.loc[test, "correct"] = 1 - flipped.loc[test, "correct"]
    cfg = VerifierConfig(cheap_share=0.1)
    one, two = (choose_stages(cascade_matrix(p, selection_matrix(p, queries, "energy_j")), cfg)
                for p in (profile, flipped))
    assert (one.first, one.final, one.agreement) == (two.first, two.final, two.agreement)


def test_the_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="extra|not permitted|unknown"):
        VerifierConfig(cheap_shares=0.1)
