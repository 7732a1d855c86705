"""The champion is chosen on val (evaluation/val_contest.py, in the evaluate stage) and never reads test.

The stage test runs the real evaluate stage on a small synthetic profile: real router_data val rows,
real kNN/MLP/MF baselines (hashing embedder, nothing downloaded). Tracking is off there (MLflow's
store setup and logging would be most of its time); registering the champion and serving it are tested
in tests/gateway/test_champion.py, on a real store. No LM router is trained here (that takes minutes);
its checkpoints enter the selection through the grpo stage's held-out figures, tested on their own below.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from jouleroute.evaluation.label_eval import load_rows
from jouleroute.evaluation.val_contest import Contender, baseline_contender, lm_contenders, select, val_queries
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.registry import build_router
from jouleroute.routing.utility import utilities
from tests.evaluation.conftest import profile_rows

SKILL = {"small": 0.35, "medium": 0.6, "large": 0.9}
ENERGY = {"small": 1.0, "medium": 4.0, "large": 12.0}
WORDS = ["apple", "river", "stone", "cloud", "ember", "frost"]


def _data(n: int = 120, seed: int = 4) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Queries whose words tell their difficulty (so the baselines can learn); 60 train, 30 val, 30 test."""
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0, 1, n)
    qids = [f"q{i:03d}" for i in range(n)]
    tasks = ["mmlu" if i % 2 else "gsm8k" for i in range(n)]
    splits = ["train" if i < 60 else "val" if i < 90 else "test" for i in range(n)]
    questions = [f"{WORDS[int(d * len(WORDS))]} {WORDS[int(d * len(WORDS))]} question {i}" for i, d in
                 enumerate(difficulty)]
    correct = {c: difficulty < s for c, s in SKILL.items()}
    energy = {c: e * (1 + 0.1 * rng.uniform(-1, 1, n)) for c, e in ENERGY.items()}
    profile = profile_rows(qids, tasks, splits, correct, energy)
    queries = pd.DataFrame({"query_id": qids, "task": tasks, "split": splits, "question": questions})
    return profile, queries


def _stage_repo(root: Path, profile: pd.DataFrame, queries: pd.DataFrame, **sections):
    from jouleroute.config import load_params
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.labels import labels_stage
    from jouleroute.training.config import RouterDataConfig
    from jouleroute.training.router_data import run_router_data

    params = {"profile_source": "replay", "energy": {"meter": "estimate"},
              "baselines": {"families": ["knn", "mlp", "mf"], "embedding": {"model": "hashing"}},
              "evaluate": {"plots": False, "bootstrap_samples": 50}, "tracking": {"enabled": False}} | sections
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    ctx = StageContext(load_params(root / "params.yaml"), root, root / "params.yaml")
    for name in ("profile", "queries"):
        ctx.path(name).parent.mkdir(parents=True, exist_ok=True)
    profile.to_parquet(ctx.path("profile"))
    queries.to_parquet(ctx.path("queries"))
    labels_stage(ctx)  # gold labels: the profile every later stage reads
    run_router_data(profile, queries, RouterDataConfig(), ctx.path("router_data_dir"))
    return ctx


def test_poisoned_test_outcomes_do_not_change_the_champion(tmp_path):
    from jouleroute.stages.evaluate import evaluate_stage

    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries)
    clean = evaluate_stage(ctx).report
    poisoned = profile.copy()
    on_test = poisoned["split"] == "test"
    poisoned.loc[on_test, "correct"] = 1 - poisoned.loc[on_test, "correct"]  # every test outcome flipped
    poisoned.to_parquet(ctx.path("profile"))
    dirty = evaluate_stage(ctx).report

    # the poison bites on test: the singles' test accuracy flips ...
    acc = lambda report: report["singles"]["large"]["views"]["models_only"]["accuracy"]
    assert acc(dirty) == pytest.approx(1 - acc(clean))
    # ... and the choice made on val does not move: the same champion, the same val figures
    assert clean["val_contest"] == dirty["val_contest"]
    assert {c["family"] for c in clean["val_contest"]["contenders"]} == {"knn", "mlp", "mf"}
    assert clean["val_contest"]["margin"] is not None and clean["val_contest"]["n_val_queries"] == 30
    # the reports say who won on val and by how much
    metrics = json.loads((ctx.path("evaluate_dir") / "metrics.json").read_text())
    assert metrics["val_contest"]["winner"] == clean["val_contest"]["winner"]
    assert "## The champion, chosen on val" in (ctx.path("evaluate_dir") / "report.md").read_text()


def test_a_baselines_val_utility_is_the_mean_utility_of_its_choices(tmp_path):
    from jouleroute.training.config import RouterDataConfig
    from jouleroute.training.router_data import run_router_data

    profile, queries = _data()
    run_router_data(profile, queries, RouterDataConfig(), tmp_path)
    rows = load_rows(tmp_path / "val.jsonl")
    cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None})
    router = build_router("knn", profile, queries, sorted(SKILL), cfg)
    got = baseline_contender("knn", router, rows, "max")
    assert sorted(got.by_lambda, key=float) == [f"{x:g}" for x in RouterDataConfig().lambdas]
    val = val_queries(rows)
    for lam, value in got.by_lambda.items():
        chosen = dict(zip(val["query_id"], router.route(val, lam=float(lam)).candidate_ids))
        direct = [utilities(r["correct_by_candidate"], r["energy_by_candidate"], float(lam), "max")
                  [chosen[r["query_id"]]] for r in rows if r["lam"] == float(lam)]
        assert value == pytest.approx(np.mean(direct), abs=1e-12)
    # the same figure as evaluation/val_utility.py's mean_utility (the levers' study): one definition
    from jouleroute.evaluation.outcomes import build_matrix
    from jouleroute.evaluation.val_utility import mean_utility

    matrix = build_matrix(profile, queries, "val", "energy_j")
    assert got.val_utility == pytest.approx(
        mean_utility(router.score(val), matrix, RouterDataConfig().lambdas, "max"), abs=1e-12)


def test_select_ranks_by_mean_val_utility_with_margins():
    grid = lambda *v: dict(zip(("0", "0.5", "2"), v))
    contenders = [Contender("lm", "sft", grid(0.6, 0.5, 0.4), "artifacts/sft/model"),
                  Contender("lm", "grpo", grid(0.62, 0.5, 0.41), "artifacts/grpo/model"),
                  Contender("knn", "fit", grid(0.6, 0.45, 0.3))]
    out = select(contenders, "max", 30)
    assert out["winner"]["name"] == "lm/grpo" and out["winner"]["model_dir"] == "artifacts/grpo/model"
    assert out["runner_up"] == "lm/sft" and out["margin"] == pytest.approx(0.03 / 3)
    assert out["best_other_family"] == "knn" and out["margin_over_other_family"] == pytest.approx(0.18 / 3)
    assert [c["name"] for c in out["contenders"]] == ["lm/grpo", "lm/sft", "knn"]
    with pytest.raises(ValueError, match="different λ grids"):
        select(contenders + [Contender("mf", "fit", {"0": 1.0})], "max", 30)


def test_lm_checkpoints_enter_with_their_held_out_figures(tmp_path):
    for name in ("sft", "grpo"):
        (tmp_path / name / "model").mkdir(parents=True)
        (tmp_path / name / "model" / "config.json").write_text("{}")
    check = lambda u: {"by_lambda": {"0": {"router_utility": u}, "1": {"router_utility": u - 0.2}}}
    dirs = {n: tmp_path / n / "model" for n in ("sft", "grpo")}
    both = lm_contenders({"heldout_sft": check(0.5), "heldout": check(0.6), "kept": "grpo"}, dirs, tmp_path)
    assert [(c.name, c.val_utility, c.model_dir) for c in both] == [
        ("lm/sft", pytest.approx(0.4), "sft/model"), ("lm/grpo", pytest.approx(0.5), "grpo/model")]
    # GRPO's weights were discarded (grpo_dir/model holds the sft weights): one contender, not two
    kept_sft = lm_contenders({"heldout_sft": check(0.5), "heldout": check(0.5), "kept": "sft"}, dirs, tmp_path)
    assert [c.name for c in kept_sft] == ["lm/sft"]
    assert lm_contenders({}, dirs, tmp_path) == []


def test_the_champion_s_margin_has_a_paired_bootstrap_ci_and_a_tie_is_named(tmp_path):
    """The margin is resampled over the val queries both contenders were scored on (paired): a per-query edge
    that never changes sign is a win, a noisy one whose interval contains 0 is reported as a tie, with the rule
    that picks the champion. where and the report say so in words."""
    from jouleroute.commands.where import champion_lines
    from jouleroute.evaluation.val_contest_section import champion_ci_line
    from jouleroute.evaluation.val_contest import margin_ci

    grid = {"0": 0.5, "2": 0.5}
    queries = [f"q{i}" for i in range(60)]
    steady = Contender("lm", "grpo", grid, per_query={q: 0.51 for q in queries})
    base = Contender("knn", "fit", {"0": 0.49, "2": 0.49}, per_query={q: 0.50 for q in queries})
    low, high = margin_ci(steady, base)
    assert low == pytest.approx(0.01) and high == pytest.approx(0.01)  # the same edge on every query: no spread
    rng = np.random.default_rng(1)
    noisy = Contender("lm", "grpo", grid, per_query={q: 0.50 + rng.normal(0, 0.2) for q in queries})
    out = select([noisy, base], "max", 60)
    low, high = out["margin_ci95"]
    assert low < 0 < high and out["margin_is_tie"] is True
    differences = [noisy.per_query[q] - base.per_query[q] for q in queries]
    assert low < np.mean(differences) < high
    line = champion_ci_line(out)
    assert "**a tie**" in line and "picks **lm/grpo** (family `lm`)" in line and "60 val queries" in line
    assert any("a tie on val" in s for s in champion_lines(out)) and "margin over knn" in champion_lines(out)[1]
    assert select([steady, base], "max", 60)["margin_is_tie"] is False
    # figures without per-query utilities (an older grpo output): no interval, no claim either way
    old = select([Contender("lm", "grpo", grid), base], "max", 60)
    assert old["margin_ci95"] is None and old["margin_is_tie"] is None and champion_ci_line(old) == ""


def _knn_on_val(folder: Path):
    """router_data's val rows of ``_data()``, a kNN fitted on its train split, and its contender on those rows."""
    from jouleroute.training.config import RouterDataConfig
    from jouleroute.training.router_data import run_router_data

    profile, queries = _data()
    run_router_data(profile, queries, RouterDataConfig(), folder)
    rows = load_rows(folder / "val.jsonl")
    router = build_router("knn", profile, queries, sorted(SKILL), BaselinesConfig(embedding={"model": "hashing",
                                                                                              "cache_dir": None}))
    return profile, rows, router, baseline_contender("knn", router, rows, "max")


def test_label_accuracy_gives_each_val_query_its_mean_utility_over_the_grid(tmp_path):
    _, rows, _, got = _knn_on_val(tmp_path)
    assert len(got.per_query) == len({r["query_id"] for r in rows})
    assert np.mean(list(got.per_query.values())) == pytest.approx(got.val_utility, abs=1e-12)  # same grid, same n


def test_the_iso_accuracy_rule_deploys_the_contender_that_spends_least_at_the_best_single_accuracy():
    """Among the contenders tied on mean val utility (paired CI holds 0), the default rule deploys the one with
    the figure a user decides by: the cheapest val point within the tolerance of the best single model's val
    accuracy, as a share of its energy. A contender ahead on utility beyond noise keeps the crown."""
    from jouleroute.evaluation.val_contest import iso_share, val_reference

    grid = lambda *v: dict(zip(("0", "0.5", "2"), v))
    reference = {"candidate": "large", "accuracy": 0.80, "j_per_query": 10.0}
    queries = [f"q{i}" for i in range(60)]
    rng = np.random.default_rng(3)
    noisy = lambda mean: {q: mean + rng.normal(0, 0.3) for q in queries}  # noqa: E731
    # the higher utility, but only its λ=0 point keeps accuracy, at the best single's full energy
    greedy = Contender("knn", "fit", grid(0.80, 0.70, 0.60), per_query=noisy(0.70),
                       points={"0": (0.80, 10.0), "0.5": (0.70, 3.0), "2": (0.60, 1.0)})
    # a little lower (within noise), yet its λ=0.5 point keeps accuracy (0.795 >= 0.80 - 0.01) at 40% of the energy
    saver = Contender("mf", "fit", grid(0.79, 0.69, 0.59), per_query=noisy(0.69),
                      points={"0": (0.81, 9.0), "0.5": (0.795, 4.0), "2": (0.50, 1.0)})
    assert iso_share(greedy, reference, 0.01) == pytest.approx(1.0)
    assert iso_share(saver, reference, 0.01) == pytest.approx(0.4)
    assert iso_share(saver, reference, 0.0) == pytest.approx(0.9)  # no tolerance: only λ=0 keeps accuracy
    assert iso_share(Contender("mlp", "fit", grid(0.1, 0.1, 0.1)), reference, 0.01) is None  # no points
    iso = select([greedy, saver], "max", 30, rule="iso_accuracy", reference=reference, tolerance=0.01)
    assert iso["winner"]["name"] == "mf" and iso["winner"]["iso_share_val"] == pytest.approx(0.4)
    assert iso["rule"] == "iso_accuracy" and iso["val_reference"] == reference and "iso-accuracy" in iso["tie_rule"]
    assert iso["tied_on_utility"] == ["mf", "knn"] and iso["margin_is_tie"] is True
    # the report and `where` say who is best on utility, that the champion is tied with it, and why it is deployed
    from jouleroute.commands.where import champion_lines
    from jouleroute.evaluation.val_contest_section import val_contest_lines

    assert iso["best_on_utility"]["name"] == "knn"
    gap = next(c for c in iso["contenders"] if c["name"] == "mf")
    assert gap["utility_gap"] == pytest.approx(saver.val_utility - greedy.val_utility)
    assert gap["utility_gap_ci95"][0] < 0 < gap["utility_gap_ci95"][1]
    text = "\n".join(val_contest_lines(iso))
    assert "The best mean val utility is knn's" in text and "tied with it" in text
    assert "Champion: **mf** (family `mf`), at 40.0% of that model's energy on val (knn 100.0%)" in text
    where = "\n".join(champion_lines(iso))
    assert "gap to the best mean val utility (knn" in where and "a tie on val with knn" in where
    assert select([greedy, saver], "max", 30, rule="utility", reference=reference)["winner"]["name"] == "knn"
    # ahead beyond noise on utility (the same edge on every query): the saving does not buy the crown
    steady = Contender("knn", "fit", grid(0.80, 0.70, 0.60), per_query={q: v + 0.2 for q, v in saver.per_query.items()},
                       points=dict(greedy.points))
    beaten = select([steady, saver], "max", 30, rule="iso_accuracy", reference=reference)
    assert beaten["winner"]["name"] == "knn" and beaten["tied_on_utility"] == ["knn"]
    # equal shares fall back to the higher mean val utility
    twin = Contender("mlp", "fit", grid(0.795, 0.695, 0.595), per_query=noisy(0.695), points=dict(saver.points))
    assert select([saver, twin], "max", 30, rule="iso_accuracy", reference=reference)["winner"]["name"] == "mlp"
    with pytest.raises(ValueError, match="unknown champion rule"):
        select([greedy], "max", 30, rule="cheapest")
    # the reference is the best single model on the val rows: highest accuracy, ties to the lower energy
    rows = [{"query_id": "a", "lam": 0.0, "correct_by_candidate": {"x": 1, "y": 1, "z": 0},
             "energy_by_candidate": {"x": 5.0, "y": 2.0, "z": 1.0}},
            {"query_id": "b", "lam": 0.0, "correct_by_candidate": {"x": 1, "y": 1, "z": 1},
             "energy_by_candidate": {"x": 5.0, "y": 4.0, "z": 1.0}}]
    assert val_reference(rows) == {"candidate": "y", "accuracy": 1.0, "j_per_query": 3.0}
    assert val_reference([]) is None


def test_a_baseline_contender_carries_its_val_points(tmp_path):
    profile, rows, router, got = _knn_on_val(tmp_path)
    val = val_queries(rows)
    truth = profile[profile["split"] == "val"].set_index(["query_id", "candidate_id"])
    for lam, (accuracy, joules) in got.points.items():
        chosen = router.route(val, lam=float(lam)).candidate_ids
        pairs = list(zip(val["query_id"], chosen))
        assert accuracy == pytest.approx(np.mean([float(truth.loc[p, "correct"]) for p in pairs]), abs=1e-12)
        assert joules == pytest.approx(np.mean([float(truth.loc[p, "energy_j"]) for p in pairs]), abs=1e-9)
