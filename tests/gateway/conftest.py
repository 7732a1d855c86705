"""Real servers on loopback: two upstreams (jouleroute's OpenAI-compatible server over two tiny
random Llamas) and gateways in front of them, each under uvicorn in a thread.

The router is a real kNN baseline fitted on a small synthetic profile where ``small`` is cheap
and right half the time and ``large`` costs ten times more and is always right: at energy weight
0 it picks ``large``, at 2 it picks ``small``. Questions are embedded with the model-free
hashing encoder, so nothing is downloaded.
"""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from jouleroute.backends.serve import create_app as create_upstream_app
from jouleroute.energy.estimate import EstimateMeter
from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.energy import ExpectedEnergy
from jouleroute.gateway.routers import ScoringGatewayRouter
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.remote import RemoteUpstream

API_KEY = "test-key-0123456789"
CANDIDATES = ["small", "large"]
ENERGY_J = {"small": 1.0, "large": 10.0}


class LiveServer:
    """uvicorn in a daemon thread on a free loopback port, lifespan on; ``stop()`` kills it."""

    def __init__(self, app) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def synthetic_profile() -> tuple[pd.DataFrame, pd.DataFrame]:
    queries, rows = [], []
    for i in range(24):
        qid = f"q{i}"
        queries.append({"query_id": qid, "task": "arith", "split": "train",
                        "question": f"what is {i} plus {2 * i} added together as a sum"})
        for cand in CANDIDATES:
            correct = 1 if cand == "large" or i % 2 == 0 else 0
            rows.append({"query_id": qid, "candidate_id": cand, "task": "arith", "split": "train",
                         "correct": correct, "energy_j": ENERGY_J[cand] * (1 + 0.05 * (i % 3)),
                         "energy_source": "estimated", "input_tokens": 20, "output_tokens": 8})
    return pd.DataFrame(rows), pd.DataFrame(queries)


@pytest.fixture(scope="session")
def tiny_backends(tmp_path_factory):
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.backends.transformers_backend import TransformersBackend

    backends = [TransformersBackend(str(build_tiny_llama(tmp_path_factory.mktemp(f"tiny{seed}"), seed=seed)),
                                    device="cpu", torch_threads=1) for seed in (0, 1)]
    yield backends
    for backend in backends:
        backend.close()


@pytest.fixture(scope="session")
def upstream_urls(tiny_backends):
    """candidate -> /v1 root of its own upstream server."""
    servers = {c: LiveServer(create_upstream_app(b, f"tiny-{c}", default_max_tokens=8))
               for c, b in zip(CANDIDATES, tiny_backends)}
    urls = {c: s.start() + "/v1" for c, s in servers.items()}
    yield urls
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def knn_router():
    from jouleroute.routing.baselines.config import BaselinesConfig
    from jouleroute.routing.registry import build_router

    profile, queries = synthetic_profile()
    cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 8})
    router = build_router("knn", profile, queries, CANDIDATES, cfg, meter=EstimateMeter())
    return ScoringGatewayRouter(router, lambda_range=(0.0, 2.0), default_lam=0.0)


@pytest.fixture(scope="session")
def expected_energy():
    return ExpectedEnergy.from_profile(synthetic_profile()[0], prefill_weight=0.1)


@pytest.fixture
def make_gateway(knn_router, expected_energy):
    """Start a gateway over ``urls`` (candidate -> /v1 root) with config overrides; stopped after the test."""
    started: list[LiveServer] = []

    def make(urls: dict[str, str], **overrides) -> tuple[str, Gateway]:
        cfg = GatewayConfig.model_validate({"limits": {"max_prompt_tokens": 64, "max_body_bytes": 4096}} | overrides)
        upstreams = {c: RemoteUpstream(c, url, f"tiny-{c}", expected_energy, timeout_s=20) for c, url in urls.items()}
        gateway = Gateway(cfg, knn_router, upstreams, KeyStore({key_hash(API_KEY)}))
        server = LiveServer(create_app(gateway))
        started.append(server)
        return server.start(), gateway

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def gateway_url(make_gateway, upstream_urls):
    return make_gateway(upstream_urls)[0]


@pytest.fixture
def client(gateway_url):
    from openai import OpenAI

    with OpenAI(base_url=gateway_url + "/v1", api_key=API_KEY, max_retries=0, timeout=30) as c:
        yield c
