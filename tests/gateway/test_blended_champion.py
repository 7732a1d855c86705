"""A champion that is the LM router with kNN evidence (chosen on val by the evaluate stage) is served as
that blend: the LM checkpoint plus the kNN saved in the champion artifact, mixed with its weight. A real
sqlite store and Model Registry, a real loopback server; the LM router is an untrained tiny model."""

from __future__ import annotations

import os

import httpx
import pytest
from openai import OpenAI

from jouleroute.evaluation.val_contest import Contender, select
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import build_gateway
from jouleroute.gateway.config import GatewayRouterConfig
from jouleroute.routing.lm.spec import RouterSpec
from jouleroute.evaluation.champion import register
from jouleroute.stages.evaluate import registry_provenance
from tests.conftest import tiny_router_base
from tests.gateway.conftest import CANDIDATES, ENERGY_J, LiveServer
from tests.gateway.test_champion import _params, save_champion


def _lm_folder(root):
    folder = tiny_router_base(root / "lm" / "model", ["what is plus added together as a sum"], seed=5)
    RouterSpec(candidates=list(CANDIDATES), labels=["A", "B"][: len(CANDIDATES)], energy_source="estimated",
               energy_norm="max", label_policy="utility", lambdas=[0.0, 2.0], utility_scale=10.0,
               max_query_tokens=32, task_energy_j={"arith": dict(ENERGY_J)}, pool_energy_j=dict(ENERGY_J)).save(folder)
    return folder


def test_a_blended_champion_is_served_as_the_lm_router_with_knn(tmp_path, upstream_urls):
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow import MlflowClient

    from jouleroute.tracking import experiment_id

    ctx = _params(tmp_path, upstream_urls)
    folder = _lm_folder(tmp_path)
    contenders = [Contender("lm", "sft-knn", {"0": 0.7, "2": 0.4}, str(folder),
                            knn_evidence={"weight": 0.5, "energy": "second"}),
                  Contender("knn", "fit", {"0": 0.6, "2": 0.35})]
    selection = select(contenders, "max", 24) | {"registered_model": "jouleroute-champion", "alias": "champion"}
    client = MlflowClient(tracking_uri=ctx.tracking_uri)
    run_id = client.create_run(experiment_id(client, ctx.tracking_uri, "jouleroute"), run_name="evaluate").info.run_id
    save_champion(ctx, selection, run_id)
    register(selection, ctx.params.router.lam, run_id, ctx.tracking_uri, "jouleroute", registry_provenance(ctx))

    gateway = build_gateway(ctx.params, ctx.root)
    blend = gateway.router.router
    assert gateway.router.name == "lm:lm+knn" and (blend.weight, blend.energy) == (0.5, "second")
    assert blend.second.name == "knn" and blend.tokenizer is blend.first.tokenizer
    server = LiveServer(create_app(gateway))
    try:
        url = server.start()
        assert httpx.get(url + "/readyz", timeout=10).json()["router"] == "lm:lm+knn"
        raw = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30).chat.completions \
            .with_raw_response.create(model="jouleroute-auto",
                                      messages=[{"role": "user", "content": "what is 3 plus 6 added together"}])
        assert raw.headers["x-jouleroute-candidate"] in upstream_urls
    finally:
        server.stop()


def test_knn_evidence_is_only_for_the_lm_router():
    with pytest.raises(ValueError, match="only with kind 'lm'"):
        GatewayRouterConfig(kind="mf", knn_weight=0.5)
