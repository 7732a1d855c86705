"""`jouleroute serve` serves the champion by default: the router the evaluate stage registered in MLflow
under the alias ``champion`` (a real sqlite store and Model Registry), on a real loopback server; an
explicit ``gateway.router`` still wins."""

from __future__ import annotations

import os

import httpx
import pytest
import yaml
from openai import OpenAI

from jouleroute.commands.serve import with_address
from jouleroute.config import load_params
from jouleroute.evaluation.selection import Contender, select
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import build_gateway
from jouleroute.stages.context import StageContext
from jouleroute.stages.evaluate import register
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
    return ctx


def test_serve_picks_the_registered_champion_by_default(tmp_path, upstream_urls):
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
    register(ctx, selection, run_id)
    found = champion(ctx.tracking_uri, "jouleroute")
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

    # an explicit gateway.router wins over the champion
    pinned = _params(tmp_path, upstream_urls, router={"kind": "mf"})
    assert build_gateway(pinned.params, pinned.root).router.name == "mf"
