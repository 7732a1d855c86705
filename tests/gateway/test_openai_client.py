"""The official openai client against the gateway: chat, completion, streaming, routing by energy weight."""

from __future__ import annotations

import httpx

from tests.gateway.conftest import API_KEY

AUTO = "jouleroute-auto"
QUESTION = "what is 5 plus 10 added together as a sum"


def test_models_lists_auto_and_every_candidate(client):
    assert [m.id for m in client.models.list().data] == [AUTO, "small", "large"]


def test_energy_weight_changes_the_candidate(client):
    """Weight 0 (accuracy only) -> the always-right 'large'; weight 2 -> the ten-times-cheaper 'small'."""
    picked = {}
    for weight in (0.0, 2.0):
        raw = client.chat.completions.with_raw_response.create(
            model=AUTO, messages=[{"role": "user", "content": QUESTION}], max_tokens=6,
            extra_headers={"X-Energy-Weight": str(weight)})
        reply = raw.parse()
        picked[weight] = raw.headers["x-jouleroute-candidate"]
        assert reply.model == picked[weight]
        assert raw.headers["x-jouleroute-energy-weight"] == f"{weight:g}"
        assert raw.headers["x-jouleroute-energy-source"] == "expected:estimated"  # never "measured" for a server
        assert float(raw.headers["x-jouleroute-energy-j"]) > 0
        assert raw.headers["x-jouleroute-router-energy-source"] == "estimated"
        assert float(raw.headers["x-jouleroute-router-latency-s"]) > 0
        ext = reply.usage.model_extra["jouleroute"]
        assert ext["candidate"] == picked[weight] and ext["energy_source"] == "expected:estimated"
        assert ext["energy_j"] == float(raw.headers["x-jouleroute-energy-j"]) or abs(
            ext["energy_j"] - float(raw.headers["x-jouleroute-energy-j"])) < 1e-5 * ext["energy_j"]
        assert reply.usage.completion_tokens > 0
    assert picked == {0.0: "large", 2.0: "small"}


def test_energy_weight_from_extra_body_and_expensive_candidate_costs_more(client):
    costs = {}
    for weight in (0.0, 2.0):
        raw = client.completions.with_raw_response.create(model=AUTO, prompt=QUESTION, max_tokens=6,
                                                          extra_body={"energy_weight": weight})
        costs[raw.headers["x-jouleroute-candidate"]] = raw.parse().usage.model_extra["jouleroute"]
    assert set(costs) == {"small", "large"}
    # same prompt, similar tokens: the profile says large costs ~10x per token
    per_token = {c: v["energy_j"] for c, v in costs.items()}
    assert per_token["large"] > 3 * per_token["small"]


def test_explicit_candidate_bypasses_routing_and_matches_the_upstream(client, upstream_urls):
    raw = client.completions.with_raw_response.create(model="small", prompt=QUESTION, max_tokens=8,
                                                      extra_headers={"X-Energy-Weight": "0"})
    reply = raw.parse()
    assert raw.headers["x-jouleroute-candidate"] == "small"
    assert raw.headers["x-jouleroute-router"] == "none"
    assert "x-jouleroute-energy-weight" not in raw.headers
    direct = httpx.post(upstream_urls["small"] + "/completions",
                        json={"model": "tiny-small", "prompt": QUESTION, "max_tokens": 8}).json()
    assert reply.choices[0].text == direct["choices"][0]["text"]
    assert reply.usage.completion_tokens == direct["usage"]["completion_tokens"]


def test_chat_streaming_matches_the_whole_answer_and_ends_with_energy(client):
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(model="large", messages=messages, max_tokens=8)
    chunks = list(client.chat.completions.create(model="large", messages=messages, max_tokens=8, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    last = chunks[-1]  # no usage chunk asked for: the energy rides on the finish chunk
    assert last.choices and last.choices[0].finish_reason
    ext = last.usage.model_extra["jouleroute"]
    assert ext["candidate"] == "large" and ext["energy_source"] == "expected:estimated" and ext["energy_j"] > 0


def test_completion_streaming_with_usage_chunk(client):
    with client.completions.with_streaming_response.create(
            model=AUTO, prompt=QUESTION, max_tokens=8, stream=True, stream_options={"include_usage": True},
            extra_headers={"X-Energy-Weight": "2"}) as response:
        assert response.headers["x-jouleroute-candidate"] == "small"
        chunks = list(response.parse())
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage.completion_tokens > 0
    assert usage_chunk.usage.model_extra["jouleroute"]["energy_weight"] == 2.0
    assert any(c.choices and c.choices[0].text for c in chunks)


def test_health_and_readiness(gateway_url):
    assert httpx.get(gateway_url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(gateway_url + "/readyz")
    assert ready.status_code == 200 and ready.json()["problems"] == []
    assert httpx.get(gateway_url + "/v1/models").status_code == 401  # listing needs a key too
    assert httpx.get(gateway_url + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
