"""The experiments (experiments/README.md) start, explain themselves, and choose by the rule they state.

Each one reads a finished study's artifacts, which the default suite does not build: each is checked to import
against today's library (``--help`` in a subprocess), to choose by its stated rule, and to run end to end on a
small profile (and a tiny random LM router) built here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted((REPO / "experiments").glob("*.py"))


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda p: p.name)
def test_each_experiment_explains_itself(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout and len(done.stdout.splitlines()) > 5


def _budget(folder: Path, k: int, steps: int, joules: float, ci: list[float], utility: float) -> Path:
    folder.mkdir(parents=True)
    point = {"recipe": "sft+grpo", "fraction": 0.5, "k": k, "grpo_steps": steps, "profiling_j": joules,
             "share_of_full_train_tournament": joules / 100, "revealed_pairs": 10, "val_utility": utility,
             "val_minus_full_sft": sum(ci) / 2, "val_minus_full_sft_ci95": ci, "test_utility": utility,
             "test_minus_full_sft": 0.0, "test_minus_full_sft_ci95": [-0.01, 0.01]}
    (folder / "budget.json").write_text(json.dumps({"points": [point, {**point, "recipe": "sft"}]}))
    return folder


def _experiment(name: str):
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(REPO / "experiments"))


def test_the_grpo_sweep_picks_the_fewest_joules_among_the_settings_that_tie_on_val(tmp_path):
    dirs = [_budget(tmp_path / "a", 2, 200, 57.0, [-0.02, 0.01], 0.60),
            _budget(tmp_path / "b", 2, 100, 54.0, [-0.02, 0.01], 0.59),
            _budget(tmp_path / "c", 4, 100, 40.0, [-0.05, -0.01], 0.55)]  # cheapest, but worse beyond noise
    out = tmp_path / "sweep.json"
    done = subprocess.run([sys.executable, str(REPO / "experiments/grpo_sweep.py"), *map(str, dirs), "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["chosen"] == {"k": 2, "steps": 100}
    assert [(r["k"], r["steps"], r["val_tie"]) for r in record["settings"]] == [(2, 100, True), (2, 200, True),
                                                                              (4, 100, False)]


def test_router_levers_uses_the_library_s_per_query_utility_and_paired_interval():
    from jouleroute import stats

    router_levers = _experiment("router_levers")

    diff = np.random.default_rng(0).normal(0.01, 0.05, 80)
    got = router_levers.paired_mean_ci(diff)
    assert [got["ci_low"], got["ci_high"]] == stats.paired_mean_ci(diff)
    assert got["verdict"] == ("tie" if got["ci_low"] <= 0 <= got["ci_high"] else "win")
    steady = router_levers.paired_mean_ci(np.full(40, -0.02))
    assert steady["verdict"] == "loss" and steady["ci_low"] == pytest.approx(-0.02)


def test_router_levers_runs_end_to_end_on_a_small_profile_and_a_tiny_router(tmp_path):
    """Two tiny routers (the second one's val utility is paired with the first's), fp32 and int8, kNN on a hashing
    embedder: every figure of the record is there and finite, the first router's difference to itself is 0."""
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.routing.lm.spec import RouterSpec
    from tests.evaluation.test_val_contest import ENERGY, _data, _stage_repo

    profile, queries = _data()
    _stage_repo(tmp_path, profile, queries)
    pool = sorted(ENERGY)
    for name, seed in (("a", 0), ("b", 1)):
        folder = build_tiny_llama(tmp_path / name, hidden_size=32, num_layers=2, num_heads=2, seed=seed,
                                  corpus=list(queries["question"]))
        RouterSpec(candidates=pool, labels=["A", "B", "C"], energy_source="modelled", energy_norm="max",
                   label_policy="utility", lambdas=[0.0, 0.5, 2.0], utility_scale=10.0, max_query_tokens=32,
                   task_energy_j={t: ENERGY for t in ("gsm8k", "mmlu")}, pool_energy_j=ENERGY).save(folder)
    out = tmp_path / "levers.json"
    _experiment("router_levers").main(["--root", str(tmp_path), "--params", "params.yaml", "--router", "first=a",
                                       "--router", "second=b", "--weights", "0,0.5", "--out", str(out)])
    record = json.loads(out.read_text())
    assert set(record["routers"]) == {"first", "second"} and np.isfinite(record["knn"]["test_aiq"])
    first, second = record["routers"]["first"], record["routers"]["second"]
    assert first["none"]["val_minus_first"]["difference"] == 0 and first["layers"] == 2
    for row in (first, second):
        assert set(row["int8_agreement_val"]) == {f"{lam:g}" for lam in record["lambdas"]}
        for variant in ("none", "int8"):
            figures = row[variant]
            assert figures["blend"]["weight"] in (0.0, 0.5)
            assert all(np.isfinite(figures[k]) for k in ("val_utility", "test_aiq_lm", "test_aiq_blended"))


def test_the_scaffold_ablation_runs_on_a_small_profile_with_evaluate_s_sample_and_order(tmp_path):
    """A run end to end on a tiny replay-like profile (hashing embedder): a row per learned family, both AIQs."""
    from jouleroute.routing.families import learned_families
    from tests.evaluation.test_val_contest import _data, _stage_repo

    ctx = _stage_repo(tmp_path, *_data())
    page = tmp_path / "ablation.md"
    _experiment("scaffold_ablation").main(["--root", str(tmp_path), "--params", "params.yaml", "--out", str(page)])
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == list(learned_families())
    aiq = json.loads((ctx.path("evaluate_dir") / "scaffold_ablation.json").read_text())
    assert set(aiq) == {f"{f}{suffix}" for f in ("knn", "mlp", "mf") for suffix in ("", "-raw")}
