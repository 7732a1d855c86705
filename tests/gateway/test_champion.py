"""`jouleroute serve` serves the champion by default: the router the evaluate stage saved as fitted in the
workspace's ``evaluate_dir/champion`` and registered in MLflow under the alias ``champion`` (a real sqlite
store and Model Registry, the artifact logged to the run), on a real loopback server; the workspace's champion
is the one served when the registry names another run; an explicit ``gateway.router`` still wins."""

from __future__ import annotations

import os

import httpx
import pytest
import yaml
from openai import OpenAI

from jouleroute.commands.serve import with_address
from jouleroute.config import load_params
from jouleroute.evaluation.val_contest import Contender, select
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import build_gateway
from jouleroute.stages.context import StageContext
from jouleroute.stages.labels import labels_stage
from jouleroute.evaluation.champion import register
from jouleroute.stages.evaluate import registry_provenance
from jouleroute.tracking import champion
from tests.gateway.conftest import LiveServer, synthetic_profile


def _params(root, upstream_urls, **extra) -> StageContext:
    params = {"profile_source": "replay", "energy": {"meter": "estimate"},
              "baselines": {"embedding": {"model": "hashing"}, "knn": {"k": 8}},
              "gateway": {"upstreams": {c: {"kind": "openai", "base_url": url, "served_name": f"tiny-{c}"}
                                        for c, url in upstream_urls.items()},
                          "auth": {"keys_env": None}, **extra}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    ctx = StageContext(load_params(root / "params.yaml"), root, root / "params.yaml")
    profile, queries = synthetic_profile()
    for name, frame in (("profile", profile), ("queries", queries)):
        ctx.path(name).parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(ctx.path(name))
    labels_stage(ctx)  # the labelled profile (gold) every later stage and the gateway read
    return ctx


def save_champion(ctx: StageContext, selection: dict, run_id: str | None) -> None:
    """What the evaluate stage saves for ``selection``'s winner: the fitted baseline (or the kNN an LM champion
    blends in), at the params' router.lam."""
    import pandas as pd

    from jouleroute.routing.champion import save_champion as save
    from jouleroute.routing.registry import build_router

    p, win = ctx.params, selection["winner"]
    family = win["family"] if win["family"] != "lm" else "knn"
    fitted = build_router(family, pd.read_parquet(ctx.path("profile")), pd.read_parquet(ctx.path("queries")),
                          p.candidate_ids or sorted(pd.read_parquet(ctx.path("profile"))["candidate_id"].unique()),
                          p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
                              update={"cache_dir": None})}), energy=p.energy_policy, lam=p.router.lam)
    record = {"family": win["family"], "checkpoint": win["checkpoint"], "name": win["name"], "lam": p.router.lam,
              "lambda_range": [min(p.router_data.lambdas), max(p.router_data.lambdas)],
              "model_dir": win["model_dir"], "knn_evidence": win.get("knn_evidence"),
              "val_utility": win["val_utility"], "evaluate_run_id": run_id,
              "embedding": p.baselines.embedding.model_dump(mode="json") | {"cache_dir": None}}
    save(ctx.path("evaluate_dir") / "champion", record, {"router" if win["family"] != "lm" else "knn": fitted},
         None)


def test_serve_picks_the_registered_champion_by_default(tmp_path, upstream_urls, caplog):
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow import MlflowClient

    from jouleroute.tracking import experiment_id

    ctx = _params(tmp_path, upstream_urls)
    with pytest.raises(FileNotFoundError, match="no trained LM router"):  # no champion yet: the LM default
        build_gateway(ctx.params, ctx.root)
    # what the evaluate stage does after choosing on val: kNN ahead of MF, registered with its val figures
    contenders = [Contender("mf", "fit", {"0": 0.50, "1": 0.30}), Contender("knn", "fit", {"0": 0.60, "1": 0.35})]
    selection = select(contenders, "max", 24) | {"registered_model": "jouleroute-champion", "alias": "champion"}
    client = MlflowClient(tracking_uri=ctx.tracking_uri)
    run_id = client.create_run(experiment_id(client, ctx.tracking_uri, "jouleroute"), run_name="evaluate").info.run_id
    save_champion(ctx, selection, run_id)
    register(selection, ctx.params.router.lam, run_id, ctx.tracking_uri, "jouleroute", registry_provenance(ctx),
             ctx.path("evaluate_dir") / "champion")
    found = champion(ctx.tracking_uri, "jouleroute")
    artifacts = {f.path for f in client.list_artifacts(run_id, "champion")}
    assert {"champion/champion.json", "champion/router.pkl"} <= artifacts  # the alias points at the artifact
    assert found["family"] == "knn" and float(found["val_utility"]) == pytest.approx(0.475)
    assert found["runner_up"] == "mf" and float(found["margin"]) == pytest.approx(0.075)
    assert found["val_utility.mf"] == "0.4" and found["evaluate_run_id"] == run_id

    # --port on the command line keeps "no router configured", so the champion is still the default
    cfg = with_address(ctx.params.gateway, None, 8123)
    assert "router" not in cfg.model_fields_set and cfg.port == 8123
    server = LiveServer(create_app(build_gateway(ctx.params, ctx.root, cfg)))
    try:
        url = server.start()
        assert httpx.get(url + "/readyz", timeout=10).json()["router"] == "knn"
        client = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30)
        raw = client.chat.completions.with_raw_response.create(
            model="jouleroute-auto", messages=[{"role": "user", "content": "what is 3 plus 6 added together"}])
        assert raw.headers["x-jouleroute-candidate"] in upstream_urls
    finally:
        server.stop()

    # another run's champion in the registry (an `exp apply` of an older run): the workspace's is served
    store = MlflowClient(tracking_uri=ctx.tracking_uri)
    other = store.create_run(experiment_id(store, ctx.tracking_uri, "jouleroute"), run_name="evaluate").info.run_id
    register(select(contenders[:1], "max", 24) | {"registered_model": "jouleroute-champion", "alias": "champion"},
             ctx.params.router.lam, other, ctx.tracking_uri, "jouleroute", registry_provenance(ctx))
    with caplog.at_level("WARNING", logger="jouleroute.gateway.build"):
        assert build_gateway(ctx.params, ctx.root).router.name == "knn"
    assert "is not this workspace's" in caplog.text

    # an explicit gateway.router wins over the champion
    pinned = _params(tmp_path, upstream_urls, router={"kind": "mf"})
    assert build_gateway(pinned.params, pinned.root).router.name == "mf"
