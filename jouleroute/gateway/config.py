"""Typed ``gateway`` section of params.yaml: what ``jouleroute serve`` routes to, and its limits.

Left empty, the gateway serves the params' own pool in-process (the ``make run`` models; a served pool by
its own servers)
behind the trained LM router, on loopback, without API keys. Every key is checked: a typo
is an error, like everywhere else in params.yaml.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from jouleroute.pool import ServedEnergy
from jouleroute.routing.families import learned_families
from jouleroute.gateway.capture import CaptureConfig
from jouleroute.gateway.drift import DriftConfig
from jouleroute.strict import StrictModel

AUTO_MODEL = "jouleroute-auto"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class GatewayRouterConfig(StrictModel):
    """Which router answers ``model: jouleroute-auto``.

    ``lm``: the trained LM router checkpoint (default ``paths.grpo_dir/model``).
    ``knn`` / ``mlp`` / ``mf`` (any learned family of ``jouleroute.routing.families``): a baseline fitted at
    start-up on the profile's train split (``baselines`` section). ``always``: one fixed candidate (a
    routing-free deployment). ``cascade``: the chain of stages in the JSON file ``chain`` (the cascade's
    artifact), asked stage by stage until the answers agree (gateway/cascade.py; docs/gateway.md).
    """

    kind: str = "lm"
    path: str | None = None  # lm: checkpoint folder; relative paths are from the repo root
    candidate: str | None = None  # always: the candidate
    chain: str | None = None  # cascade: the chain file (JSON); relative paths are from the repo root
    # concurrent queries decided in one router pass; None: the router's own (LM: router.batch_size)
    batch_size: int | None = Field(default=None, ge=1)
    batch_wait_s: float = Field(default=0.002, ge=0)  # how long a pass waits for company
    # lm: kNN's neighbour evidence blended in (routing/blend.py), as the evaluate stage chose it on val
    # (a champion's tags knn_weight, knn_energy); 0 with "first": the LM router alone
    knn_weight: float = Field(default=0.0, ge=0, le=1)
    knn_energy: Literal["first", "second"] = "first"  # whose energy estimate decides: the LM's or kNN's
    # lm: the router's arithmetic when serving (router.precision's choices). native: bf16 where the hardware
    # multiplies it natively (~3x faster on an AMX CPU; agreement with fp32 on val: docs/router-training.md)
    precision: Literal["auto", "fp32", "bf16", "native"] = "native"
    # decide with per-query energy ê_c(x) (routing/baselines/query_energy.py), fitted at start-up on the profile's
    # train split, as the evaluate stage adopted it on val (a champion's tag query_energy)
    query_energy: bool = False

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        kinds = ("lm", *learned_families(), "always", "cascade")
        if kind not in kinds:
            raise ValueError(f"unknown router kind '{kind}'; valid: {', '.join(kinds)}")
        return kind

    @model_validator(mode="after")
    def _always_needs_candidate(self) -> "GatewayRouterConfig":
        if (self.kind == "always") != (self.candidate is not None):
            raise ValueError("router.candidate is required with kind 'always' and only allowed with it")
        if (self.kind == "cascade") != (self.chain is not None):
            raise ValueError("router.chain (the chain file) is required with kind 'cascade' and only allowed with it")
        if self.kind != "lm" and (self.knn_weight > 0 or self.knn_energy != "first"):
            raise ValueError("router.knn_weight / knn_energy blend kNN into the LM router: only with kind 'lm'")
        return self


def shared_gpus(url: str, first: str, first_gpus, second: str, second_gpus) -> str | None:
    """Why two upstreams cannot both read ``url``'s GPUs as named, in one line; None when they can.

    Identical GPU sets share one meter (gateway/measured.py): each interval's joules are split over both
    upstreams' answers by tokens, as the tournament splits a window. Disjoint sets are two meters. Sets that
    overlap are neither: two meters would each charge the shared GPUs' joules to their own answers (the same
    joules twice), and one meter over the union would charge the GPUs only one of them runs on to the other's
    answers as well. So they are refused rather than attributed wrongly."""
    a, b = set(first_gpus), set(second_gpus)
    shared = a & b
    if not shared or a == b:
        return None
    return (f"{first} (gpus {sorted(a)}) and {second} (gpus {sorted(b)}) both read exporter {url} and share gpu "
            f"{sorted(shared)}, whose joules cannot be split between them: name the same gpus for both (one meter, "
            f"its joules split by tokens) or serve them on GPUs of their own")


class UpstreamConfig(StrictModel):
    """Where one candidate's answers come from.

    ``openai``: an OpenAI-compatible server (``vllm serve``, another gateway); energy is the
    profile's expectation for that candidate and the answer's token counts.
    ``inprocess``: the pool's model loaded in this process; energy is metered.
    """

    kind: Literal["openai", "inprocess"]
    base_url: str | None = None  # openai: the server's /v1 root
    served_name: str | None = None  # openai: the model name on that server (default: the candidate id)
    api_key_env: str | None = None  # openai: env var holding the upstream's key (never the key)
    timeout_s: float = Field(default=120.0, gt=0)  # whole request, streaming included
    connect_timeout_s: float = Field(default=5.0, gt=0)
    concurrency: int = Field(default=32, ge=1)  # requests in flight to this upstream at once
    # openai: its GPU node's exporter (measured answers, gateway/measured.py); default: the pool entry's `energy`
    energy: ServedEnergy | None = None
    energy_scrape_s: float = Field(default=1.0, gt=0)  # how often the exporter is read

    @model_validator(mode="after")
    def _openai_needs_url(self) -> "UpstreamConfig":
        if self.kind == "openai" and not self.base_url:
            raise ValueError("an openai upstream needs base_url (its /v1 root)")
        if self.kind == "inprocess" and (self.base_url or self.served_name or self.api_key_env or self.energy):
            raise ValueError("base_url, served_name, api_key_env and energy only apply to openai upstreams")
        return self


class AuthConfig(StrictModel):
    """API keys: one per line in ``keys_file`` and/or comma-separated in the env var ``keys_env``.

    A line may hold the key itself or ``sha256:<hex>`` of it; only hashes are kept in memory.
    With no key configured the gateway is open, which it allows only on a loopback host
    unless ``allow_anonymous`` says so.
    """

    keys_file: str | None = None
    keys_env: str | None = "JOULEROUTE_API_KEYS"
    allow_anonymous: bool = False


class LimitsConfig(StrictModel):
    max_body_bytes: int = Field(default=1_000_000, ge=1024)  # 413 above
    max_prompt_tokens: int = Field(default=8192, ge=1)  # 400 above
    max_output_tokens: int = Field(default=2048, ge=1)  # a larger max_tokens is a 400
    # Per API key (per client address when open): a token bucket of `burst` requests at once, refilled at
    # `rate_per_minute`. The defaults let one client send 100+ requests at once and keep 50 a second going
    # (a benchmark script on a laptop, an eval harness); they stop a runaway loop, not a well-behaved client.
    rate_per_minute: float = Field(default=3000.0, gt=0)
    burst: int = Field(default=256, ge=1)
    max_pending: int = Field(default=512, ge=1)  # requests admitted at once; more get 503 + Retry-After


class GatewayConfig(StrictModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    router: GatewayRouterConfig = GatewayRouterConfig()
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)  # empty: the pool (in-process or its servers)
    fallback: bool = False  # on an upstream failure or an empty answer, try the router's next-best candidate
    auth: AuthConfig = AuthConfig()
    limits: LimitsConfig = LimitsConfig()
    log_prompts: bool = False  # the access log never holds prompt text unless this is on
    capture: CaptureConfig = CaptureConfig()  # what is served, kept for the next tournament (off: no folder)
    drift: DriftConfig = DriftConfig()  # is the traffic still like the training queries? (/metrics)
    # a promoted policy is picked up without a restart: SIGHUP always; > 0: champion.json checked every this many s
    reload_poll_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _exporter_gpus_whole_or_apart(self) -> "GatewayConfig":
        # here for the upstreams this section names; gateway/measured.py applies the same rule at start-up to
        # every upstream, the pool entries' exporters included
        read = [(f"upstreams.{name}", u.energy) for name, u in self.upstreams.items()
                if u.energy is not None and u.energy.exporter_url is not None]
        for i, (first, a) in enumerate(read):
            for second, b in read[i + 1:]:
                problem = a.exporter_url.rstrip("/") == b.exporter_url.rstrip("/") and shared_gpus(a.exporter_url, first, a.gpus or (),
                                                                            second, b.gpus or ())
                if problem:
                    raise ValueError(problem)
        return self
