"""The champion is an artifact: the evaluate stage saves the router it chose as fitted, with the deployed λ
(chosen on selection data, evaluation/deployed.py), and the gateway loads it, never refitting, and decides the test queries exactly as evaluate
did at that λ. The real evaluate stage on the small synthetic profile of test_val_contest.py (real kNN/MLP/MF,
hashing embedder), with a train subsample (``baselines.max_train_queries``) that a refit ignoring it would miss.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from jouleroute.config import load_params
from jouleroute.energy import make_meter
from jouleroute.gateway.router_build import build_router
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.routers import Query
from jouleroute.routing.baselines.learned import LearnedRouter
from jouleroute.routing.champion import DECISIONS, read_champion
from jouleroute.stages.context import StageContext
from jouleroute.stages.evaluate import evaluate_stage
from tests.evaluation.test_val_contest import _data, _stage_repo


def test_the_gateway_serves_evaluates_champion_as_fitted_at_the_deployed_lambda(tmp_path, monkeypatch):
    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries)
    params = yaml.safe_load(ctx.params_path.read_text())
    params["router"] = {"lam": 1.0, "target": {"energy_share": 0.5}}  # a deployed point that mixes the models
    params["baselines"]["max_train_queries"] = 40
    ctx.params_path.write_text(yaml.safe_dump(params))
    ctx = StageContext(load_params(ctx.params_path), tmp_path, ctx.params_path)
    selection = evaluate_stage(ctx).report["val_contest"]

    folder = ctx.path("evaluate_dir") / "champion"
    record = read_champion(folder)
    assert record["family"] == selection["winner"]["family"] in {"knn", "mlp", "mf"}
    deployed = json.loads((ctx.path("evaluate_dir") / "report.json").read_text())["deployed"]
    assert record["lam"] == deployed["lam"] and record["lam_chosen_by"] == "energy_share"  # not router.lam
    assert (folder / "router.pkl").is_file()
    expected = pd.read_parquet(folder / DECISIONS)

    def refit(*args, **kwargs):
        raise AssertionError("the gateway refitted the champion")

    monkeypatch.setattr(LearnedRouter, "fit", refit)
    served = build_router(ctx.params, GatewayConfig(), tmp_path, make_meter(ctx.params.energy))
    assert served.name == record["family"] and served.default_lam == pytest.approx(deployed["lam"])
    test = queries[queries["split"] == "test"].set_index("query_id").loc[expected["query_id"]]
    ranked = served.rank([Query(q, t, served.default_lam) for q, t in zip(test["question"], test["task"])])
    assert [r.ranking[0] for r in ranked] == list(expected["candidate_id"])
    assert len(set(expected["candidate_id"])) > 1  # the comparison is not between two constant routers


def test_no_champion_leaves_no_stale_artifact(tmp_path):
    """Without val rows no champion is chosen: the stage clears the folder, so no stale router is served."""
    profile, queries = _data()
    ctx = _stage_repo(tmp_path, profile, queries)
    (ctx.path("router_data_dir") / "val.jsonl").unlink()
    folder = ctx.path("evaluate_dir") / "champion"
    folder.mkdir(parents=True)
    (folder / "router.pkl").write_bytes(b"stale")
    report = evaluate_stage(ctx).report
    assert "deployed" not in report and "selection" not in report
    assert sorted(p.name for p in folder.iterdir()) == ["champion.json"]  # still there: a DVC output
    assert read_champion(folder) is None


def _write(root):
    (root / "params.yaml").write_text(yaml.safe_dump({"tracking": {"enabled": False}}))
    return root / "params.yaml"


def test_a_champion_that_decides_with_per_query_energy_is_served_with_the_model_evaluate_fitted(tmp_path,
                                                                                               monkeypatch):
    """On tables where a query's words say how long its answer runs (tests/routing/test_query_energy.py), the
    champion adopts per-query energy on val; the artifact holds the router and the ê model apart, and the
    gateway's choices on the test queries equal evaluate's, refitting neither."""
    from jouleroute.routing.baselines.query_energy import QueryEnergyModel
    from tests.routing.test_query_energy import _tables

    profile, queries = _tables()
    ctx = _stage_repo(tmp_path, profile, queries, baselines={"families": ["mf"], "embedding": {"model": "hashing"}},
                      router={"lam": 1.0}, energy_policy={"allow_mixed_sources": True})  # modelled rows
    report = evaluate_stage(ctx).report
    assert report["val_contest"]["query_energy"]["families"]["mf"]["adopted"]
    folder = ctx.path("evaluate_dir") / "champion"
    record = read_champion(folder)
    assert record["family"] == "mf" and record["query_energy"] == ["router"]
    assert (folder / "query_energy.pkl").is_file()
    expected = pd.read_parquet(folder / DECISIONS)

    def refit(*args, **kwargs):
        raise AssertionError("the gateway refitted the champion")

    monkeypatch.setattr(LearnedRouter, "fit", refit)
    monkeypatch.setattr(QueryEnergyModel, "fit", refit)
    served = build_router(ctx.params, GatewayConfig(), tmp_path, make_meter(ctx.params.energy))
    test = queries[queries["split"] == "test"].set_index("query_id").loc[expected["query_id"]]
    ranked = served.rank([Query(q, t, served.default_lam) for q, t in zip(test["question"], test["task"])])
    assert [r.ranking[0] for r in ranked] == list(expected["candidate_id"])
    assert len(set(expected["candidate_id"])) > 1
