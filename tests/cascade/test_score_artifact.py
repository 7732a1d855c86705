"""A chosen chain on test against the best single (policy/cascade_choice.py), and the chain file (cascade/artifact.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jouleroute.cascade.artifact import KEYS, ChainArtifact
from jouleroute.cascade.chain import Chain
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.cascade.search import search
from jouleroute.policy.cascade_choice import choose_chain, decision_figure, score_chain
from jouleroute.policy.compare import accuracy_verdict
from jouleroute.policy.target import Target as CascadeTarget
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.evaluation.outcomes import build_matrix
from tests.cascade.pool import synthetic_pool


@pytest.fixture(scope="module")
def matrices():
    profile, queries = synthetic_pool(n=1600, seed=6)
    return (cascade_matrix(profile, selection_matrix(profile, queries, "energy_j")),
            cascade_matrix(profile, build_matrix(profile, queries, "test", "energy_j")))


def test_a_cascade_above_the_best_single_is_scored_above_it_on_test(matrices):
    _, test = matrices
    out = score_chain(Chain((("cheap_a", "cheap_b"), ("best",))), test, "best", 0.03, samples=300)
    assert out["accuracy_diff_vs_best"] > 0 and out["verdict"] == "above"
    lo, hi = out["accuracy_diff_vs_best_ci"]
    assert lo <= out["accuracy_diff_vs_best"] <= hi
    lo, hi = out["energy_share_of_best_ci"]
    assert lo <= out["energy_share_of_best"] <= hi < 1
    three = score_chain(Chain((("cheap_a", "cheap_b"), ("mid",), ("best",)), 100), test, "best", 0.03, samples=0)
    assert len(three["stop_share"]) == 3 and sum(three["stop_share"]) == pytest.approx(1)
    assert three["accuracy_diff_vs_best_ci"] is None and three["verdict"] == "untested"
    assert out["best_single"]["candidate"] == "best" and out["energy_sources"] == ["modelled"]
    assert score_chain(Chain((("best",),)), test, "best", 0.03, samples=100)["verdict"] == "non-inferior"


def test_the_decision_figure_is_the_most_accurate_chain_within_the_best_single_s_energy(matrices):
    selection, test = matrices
    space = search(selection, "best")
    figure = decision_figure(space, selection, test, 0.03, samples=200)
    assert figure["selection"]["energy_share_of_best"] <= 1 + 1e-9
    assert figure["selection"]["accuracy"] == pytest.approx(space.accuracy[space.j_per_query <= space.best_j_per_query
                                                                           + 1e-9].max())
    assert figure["test"]["samples"] == 200 and "accuracy_diff_vs_best_ci" in figure["test"]


def test_one_set_of_verdict_words_reads_the_interval_at_the_margin():
    assert accuracy_verdict([0.01, 0.03], 0.03) == "above" and accuracy_verdict([-0.02, 0.01], 0.03) == "non-inferior"
    assert accuracy_verdict([-0.05, -0.04], 0.03) == "inferior" and accuracy_verdict([-0.04, 0.01], 0.03) == "inconclusive"
    assert accuracy_verdict(None, 0.03) == "untested"


def test_the_chain_file_round_trips_in_its_exact_format(matrices, tmp_path):
    selection, _ = matrices
    space = search(selection, "best", token_bounds=[None, 200])
    choice = choose_chain(space, selection, CascadeTarget(above_best=0.0), samples=200)
    artifact = ChainArtifact(choice.chain, choice.target.kind, choice.selection)
    path = tmp_path / "chain.json"
    artifact.write(path)
    data = json.loads(path.read_text())
    assert list(data) == list(KEYS) == ["stages", "max_output_tokens", "chosen_by", "selection"]
    assert data["stages"] == [list(s) for s in choice.chain.stages] and data["chosen_by"] == "above_best"
    assert ChainArtifact.read(path) == artifact
    literal = ('{"stages": [["cand_a", "cand_b"], ["cand_c"]], "max_output_tokens": null, "chosen_by": '
               '"energy_share", "selection": {}}')
    parsed = ChainArtifact.from_json(literal)
    assert parsed.chain == Chain((("cand_a", "cand_b"), ("cand_c",))) and parsed.chosen_by == "energy_share"


@pytest.mark.parametrize("text,field", [
    ('{"stages": [["a"]], "max_output_tokens": null, "chosen_by": "x", "selection": {}, "extra": 1}', "keys"),
    ('{"stages": [["a"]], "max_output_tokens": null, "chosen_by": "x"}', "keys"),
    ('{"stages": ["a"], "max_output_tokens": null, "chosen_by": "x", "selection": {}}', "stages"),
    ('{"stages": [["a"]], "max_output_tokens": "512", "chosen_by": "x", "selection": {}}', "max_output_tokens"),
    ('{"stages": [["a"], ["a"]], "max_output_tokens": null, "chosen_by": "x", "selection": {}}', "twice"),
    ('not json', "not JSON"),
])
def test_a_bad_chain_file_is_an_error_naming_the_file_and_field(text, field):
    with pytest.raises(ValueError, match=field) as err:
        ChainArtifact.from_json(text, "artifacts/cascade/chain.json")
    assert "artifacts/cascade/chain.json" in str(err.value)


def test_reading_a_chain_file_imports_no_math_verify():
    """The gateway reads chain files: that must not cost the search's imports (sympy via math-verify)."""
    code = "import sys, jouleroute.cascade.artifact; assert 'math_verify' not in sys.modules, 'math_verify'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
