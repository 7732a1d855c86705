"""Prometheus metrics of one gateway, in its own registry (several gateways can share a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Routing takes milliseconds; answers take up to minutes on a CPU.
ROUTING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
REQUEST_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("jouleroute_gateway_requests", "Requests answered, by route, candidate and status",
                                ["route", "candidate", "status"], registry=r)
        self.routing_seconds = Histogram("jouleroute_gateway_routing_seconds",
                                         "Time a request spent being routed (queue and router pass)",
                                         buckets=ROUTING_BUCKETS, registry=r)
        self.request_seconds = Histogram("jouleroute_gateway_request_seconds",
                                         "End-to-end time of a request, to its last byte", ["route"],
                                         buckets=REQUEST_BUCKETS, registry=r)
        self.energy = Counter("jouleroute_gateway_energy_joules", "Energy of answers, by candidate and energy_source",
                              ["candidate", "energy_source"], registry=r)
        self.router_energy = Counter("jouleroute_gateway_router_energy_joules", "Energy the router itself used",
                                     ["router", "energy_source"], registry=r)
        self.tokens = Counter("jouleroute_gateway_tokens", "Tokens by candidate and kind (prompt/completion)",
                              ["candidate", "kind"], registry=r)
        self.upstream_errors = Counter("jouleroute_gateway_upstream_errors", "Failed upstream calls",
                                       ["candidate", "status"], registry=r)
        self.empty_answers = Counter("jouleroute_gateway_empty_answers", "Upstream answers with no text, never served",
                                     ["candidate"], registry=r)
        self.rate_limited = Counter("jouleroute_gateway_rate_limited", "Requests refused with 429, by the limit hit "
                                    "(burst or rate_per_minute)", ["limit"], registry=r)
        self.fallbacks = Counter("jouleroute_gateway_fallbacks", "Requests answered by a fallback candidate",
                                 ["failed", "answered"], registry=r)
        self.pending = Gauge("jouleroute_gateway_pending_requests", "Requests inside the gateway", registry=r)

    def answer(self, candidate: str, energy_j: float | None, source: str, prompt: int, completion: int) -> None:
        if energy_j is not None:
            self.energy.labels(candidate, source).inc(max(energy_j, 0.0))
        self.tokens.labels(candidate, "prompt").inc(prompt)
        self.tokens.labels(candidate, "completion").inc(completion)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
