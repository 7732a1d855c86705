"""The cascade section of the evaluate stage (evaluation/cascade_section.py): chosen on selection, scored on test."""

from __future__ import annotations

import numpy as np

from jouleroute.cascade.artifact import ChainArtifact
from jouleroute.evaluation.bootstrap import family_aiq
from jouleroute.evaluation.cascade_section import cascade_lines, cascade_metrics
from jouleroute.evaluation.cascades import cascade_block, write_chain_files
from jouleroute.evaluation.outcomes import build_matrix
from tests.evaluation.conftest import profile_rows, queries_frame


def _pool(n: int = 300, seed: int = 0, answers: bool = True):
    """GSM8K-like: two cheap models give the same right answer on 70% of the queries and different wrong ones
    elsewhere; ``big`` is right everywhere at 10 J."""
    rng = np.random.default_rng(seed)
    qids = [f"gsm8k/{i}" for i in range(n)]
    tasks, splits = ["gsm8k"] * n, ["train" if i % 3 == 0 else "val" if i % 3 == 1 else "test" for i in range(n)]
    easy = rng.uniform(size=n) < 0.7
    correct = {"cheap_a": easy, "cheap_b": easy, "big": np.ones(n, bool)}
    profile = profile_rows(qids, tasks, splits, correct, {"cheap_a": [1.0] * n, "cheap_b": [1.0] * n,
                                                          "big": [10.0] * n})
    said = {"cheap_a": lambda i: "42" if easy[i] else "1", "cheap_b": lambda i: "42.0" if easy[i] else "2",
            "big": lambda i: "42"}
    profile["extracted_answer"] = [said[c](int(q.split("/")[1])) if answers else None
                                   for q, c in zip(profile["query_id"], profile["candidate_id"])]
    profile["output_tokens"] = 50
    profile["output_text"] = None
    return profile, queries_frame(qids, tasks, splits)


def test_two_cheap_models_that_agree_when_right_reach_the_best_models_accuracy_for_less_energy(tmp_path):
    profile, queries = _pool()
    test = build_matrix(profile, queries, "test", "energy_j")
    block = cascade_block(profile, queries, test, "energy_j", None, 0.01, 0.03, 300, 0.95, 0)
    decided = block["decision"]["test"]
    assert decided["chain"] == "cheap_a+cheap_b > big" and decided["accuracy"] == 1.0
    # 2 J for the pair on every query, plus the big model's 10 J on the ~30% they disagree on
    assert 0.4 < decided["energy_share_of_best"] < 0.6 and decided["energy_share_of_best_ci"][1] < 1.0
    assert block["best_single"] == "big" and abs(sum(decided["stop_share"]) - 1.0) < 1e-9
    assert cascade_metrics(block)["decision"]["chain"] == decided["chain"]
    assert "## Cascades that read the answers" in "\n".join(cascade_lines(block, "estimated"))
    # the routers' yardstick: the frontier's chains on test lift AIQ above the singles' own frontier
    singles = family_aiq(test.correct.mean(axis=0), test.energy_j.mean(axis=0), np.array([]), np.array([]))
    assert block["aiq"] > singles and len(block["test_frontier"]) >= 1
    write_chain_files(block, tmp_path / "cascade")  # what `jouleroute serve` runs, one file per target
    served = ChainArtifact.read(tmp_path / "cascade" / "iso_accuracy.json")
    assert served.chosen_by == "iso_accuracy" and served.chain.name == block["targets"]["iso_accuracy"]["chain"]


def test_a_profile_without_answers_says_so_in_one_line(tmp_path):
    profile, queries = _pool(answers=False)
    block = cascade_block(profile, queries, build_matrix(profile, queries, "test", "energy_j"), "energy_j", None,
                          0.01, 0.03, 100, 0.95, 0)
    assert set(block) == {"skipped"} and "no answers" in block["skipped"]
    assert cascade_lines(block, "estimated")[-1].startswith("Cascade skipped")
    write_chain_files(block, tmp_path / "cascade")
    assert [p.name for p in (tmp_path / "cascade").iterdir()] == ["SKIPPED.txt"]


def test_each_configured_target_and_the_router_s_own_get_a_chain_file_and_an_out_of_fold_check(tmp_path):
    from jouleroute.policy.cascade_config import CascadeConfig

    profile, queries = _pool(n=450, seed=3)
    test = build_matrix(profile, queries, "test", "energy_j")
    cfg = CascadeConfig(targets={"nine_tenths": {"energy_share": 0.9}})
    block = cascade_block(profile, queries, test, "energy_j", None, 0.01, 0.03, 200, 0.95, 0, cfg, ("accuracy_floor", 0.95))
    assert set(block["targets"]) == {"nine_tenths", "router_target"}
    assert block["targets"]["router_target"]["selection"]["target"] == {"kind": "accuracy_floor", "value": 0.95}
    for entry in block["targets"].values():  # the pair's lead is real: it survives out of fold
        assert entry["out_of_fold"]["folds"] == 5 and entry["out_of_fold"]["accuracy_diff_vs_best"] > -0.02
    text = "\n".join(cascade_lines(block, "estimated"))
    assert "nine_tenths: ≤ 90% of the best single's energy" in text and "router_target: accuracy ≥ 0.95" in text
    assert cascade_metrics(block)["nine_tenths"]["oof_energy_share_of_best"] < 0.9
    write_chain_files(block, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nine_tenths.json", "router_target.json"]
