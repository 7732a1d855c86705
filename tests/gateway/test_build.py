"""``build_gateway`` from params: an in-process candidate (metered) next to an OpenAI-compatible upstream."""

from __future__ import annotations

from openai import OpenAI

from jouleroute.config import Params
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import build_gateway
from tests.gateway.conftest import LiveServer


def test_params_build_an_inprocess_and_a_remote_upstream(tmp_path, tiny_backends, upstream_urls):
    params = Params.model_validate({
        "models": {"tiny": {"source": "local", "path": tiny_backends[1].model_id}},
        "pool": [{"candidate_id": "local-cot", "model": "tiny", "prompt_style": "chat", "answer_style": "cot",
                  "max_new_tokens": 6}],
        "backend": {"device": "cpu", "torch_threads": 1},
        "energy": {"meter": "estimate"},
        "paths": {"profile": str(tmp_path / "no-profile.parquet")},
        "gateway": {"router": {"kind": "always", "candidate": "local-cot"},
                    "upstreams": {"local-cot": {"kind": "inprocess"},
                                  "remote": {"kind": "openai", "base_url": upstream_urls["small"],
                                             "served_name": "tiny-small"}},
                    "auth": {"keys_env": None}}})
    gateway = build_gateway(params, tmp_path)
    server = LiveServer(create_app(gateway))
    try:
        client = OpenAI(base_url=server.start() + "/v1", api_key="unused", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="jouleroute-auto", messages=[{"role": "user", "content": "what is 2 plus 2"}])
        assert raw.headers["x-jouleroute-candidate"] == "local-cot"
        assert raw.headers["x-jouleroute-energy-source"] == "estimated"  # metered in-process, not expected
        assert float(raw.headers["x-jouleroute-energy-j"]) >= 0
        assert raw.parse().usage.completion_tokens <= 6  # the candidate's max_new_tokens is the default
        messages = [{"role": "user", "content": "what is 2 plus 2"}]
        chunks = list(client.chat.completions.create(model="local-cot", messages=messages, stream=True))
        assert chunks[-1].usage.model_extra["jouleroute"]["energy_source"] == "estimated"
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == raw.parse().choices[0].message.content  # greedy: the same answer, whole or streamed
        remote = client.completions.with_raw_response.create(model="remote", prompt="hello", max_tokens=3)
        # no profile: an upstream server's energy is not guessed
        assert remote.headers["x-jouleroute-energy-source"] == "unavailable"
        assert "x-jouleroute-energy-j" not in remote.headers
    finally:
        server.stop()
