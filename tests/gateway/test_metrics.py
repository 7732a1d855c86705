"""/metrics counts exactly what was sent: requests by route, candidate and status; joules by source."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _samples(url: str) -> dict[tuple, float]:
    text = httpx.get(url + "/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_what_was_sent(make_gateway, upstream_urls):
    url, _ = make_gateway(upstream_urls)
    # a plain completion: `small` (a random tiny model) answers chats with vertical tabs only, an empty answer
    body = {"model": "jouleroute-auto", "prompt": "what is 2 plus 2", "max_tokens": 4}
    for _ in range(3):
        assert httpx.post(url + "/v1/completions", json=body, headers=AUTH | {"X-Energy-Weight": "2"}).is_success
    assert httpx.post(url + "/v1/completions", json=body | {"model": "large"}, headers=AUTH).is_success
    assert httpx.post(url + "/v1/completions", json=body, headers={}).status_code == 401
    m = _samples(url)
    route = ("route", "/v1/completions")

    def requests(candidate, status):
        return m.get(("jouleroute_gateway_requests_total", (("candidate", candidate), route, ("status", status))), 0)

    assert requests("small", "200") == 3
    assert requests("large", "200") == 1
    assert requests("none", "401") == 1
    assert m[("jouleroute_gateway_routing_seconds_count", ())] == 3  # the named candidate was not routed
    assert m[("jouleroute_gateway_request_seconds_count", (route,))] == 5
    small_j = m[("jouleroute_gateway_energy_joules_total", (("candidate", "small"),
                                                            ("energy_source", "expected:estimated")))]
    large_j = m[("jouleroute_gateway_energy_joules_total", (("candidate", "large"),
                                                            ("energy_source", "expected:estimated")))]
    assert small_j > 0 and large_j > 0
    router_j = ("jouleroute_gateway_router_energy_joules_total", (("energy_source", "estimated"), ("router", "knn")))
    assert m[router_j] > 0  # the kNN pass was metered with the CPU-time estimate
    assert m[("jouleroute_gateway_pending_requests", ())] == 0
