"""Capture and feedback on a real gateway over real loopback upstreams (issue 49): every served request is a line
that `jouleroute.labels` reads back as a query; prompts are hashed when asked; feedback names a served request
(404 for an unknown id, 422 for a bad score) and lands beside the capture; /metrics counts both."""

from __future__ import annotations

import time

import httpx

from jouleroute.gateway.capture import CAPTURE, FEEDBACK, Capture, CaptureConfig, read_capture
from jouleroute.labels.config import PromptsConfig
from jouleroute.labels.queries import import_prompts
from tests.gateway.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _chat(url: str, text: str, stream: bool = False) -> httpx.Response:
    body = {"model": "jouleroute-auto", "messages": [{"role": "user", "content": text}], "max_tokens": 4,
            "stream": stream}
    return httpx.post(url + "/v1/chat/completions", headers=AUTH, json=body, timeout=30)


def _settle(capture: Capture, stream: str, n: int) -> None:
    deadline = time.monotonic() + 20
    while capture.writer.written[stream] < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_served_requests_round_trip_into_a_query_table_and_feedback_lands_beside(make_gateway, upstream_urls,
                                                                                   tmp_path):
    url, gateway = make_gateway(upstream_urls)
    gateway.version = "route:test"
    gateway.capture = capture = Capture(CaptureConfig(folder=str(tmp_path)), tmp_path, gateway.metrics.registry)
    answered = [_chat(url, f"what is {i} plus 4", stream=i % 2 == 1) for i in range(6)]
    assert all(r.status_code == 200 for r in answered)
    assert {r.headers["x-jouleroute-policy-version"] for r in answered} == {"route:test"}
    _settle(capture, CAPTURE, 6)
    read = read_capture(tmp_path)
    assert [r["request_id"] for r in read.records] == [r.headers["x-request-id"] for r in answered]
    first = read.records[0]
    assert first["messages"][-1]["content"] == "what is 0 plus 4" and first["served"]["policy_version"] == "route:test"
    assert first["served"]["calls"][0]["candidate"] == answered[0].headers["x-jouleroute-candidate"]
    assert first["served"]["energy_source"] and first["served"]["status"] == 200
    assert all(r["served"]["answer"] for r in read.records)  # streamed answers are captured too
    segment = next(tmp_path.glob("capture-*.jsonl"))
    queries = import_prompts(segment, PromptsConfig()).table.to_pandas()  # a capture segment is a prompts file
    assert len(queries) == 6 and set(queries["split"]) <= {"train", "val", "test"}

    rid = answered[0].headers["x-request-id"]
    ok = httpx.post(url + "/v1/feedback", headers=AUTH, json={"request_id": rid, "score": 1}, timeout=10)
    assert ok.status_code == 202, ok.text
    unknown = httpx.post(url + "/v1/feedback", headers=AUTH, json={"request_id": "nope", "score": 1}, timeout=10)
    assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]["message"]
    bad = httpx.post(url + "/v1/feedback", headers=AUTH, json={"request_id": rid, "score": 3}, timeout=10)
    assert bad.status_code == 422 and "[0, 1]" in bad.json()["error"]["message"]
    anonymous = httpx.post(url + "/v1/feedback", json={"request_id": rid, "score": 1}, timeout=10)
    assert anonymous.status_code == 401  # authenticated like every route
    stranger = httpx.post(url + "/v1/feedback", headers=AUTH, json={"request_id": rid, "score": 1, "candidate": "gpt-9"},
                          timeout=10)  # it was written to the feedback file, a label for a model the pool lacks
    assert stranger.status_code == 422 and "'gpt-9' is not served here" in stranger.json()["error"]["message"]
    _settle(capture, FEEDBACK, 1)
    scored = read_capture(tmp_path, FEEDBACK).records
    assert len(scored) == 1 and scored[0]["request_id"] == rid and scored[0]["score"] == 1.0
    assert scored[0]["candidate"] == answered[0].headers["x-jouleroute-candidate"]
    metrics = httpx.get(url + "/metrics").text
    assert "jouleroute_gateway_capture_records 6.0" in metrics and "jouleroute_gateway_capture_dropped 0.0" in metrics
    assert "jouleroute_gateway_feedback_records 1.0" in metrics


def test_prompts_are_hashed_when_kept_out(make_gateway, upstream_urls, tmp_path):
    url, gateway = make_gateway(upstream_urls)
    gateway.capture = capture = Capture(CaptureConfig(folder=str(tmp_path), keep_prompts=False), tmp_path)
    assert _chat(url, "a private question").status_code == 200
    _settle(capture, CAPTURE, 1)
    record = read_capture(tmp_path).records[0]
    assert "messages" not in record and record["prompt_sha256"].startswith("sha256:")
    assert record["served"]["answer"] is None and "private" not in next(tmp_path.glob("capture-*")).read_text()
