"""The gateway's parts on their own: typed config, key store, rate limiter, admission, expected energy."""

from __future__ import annotations

import pandas as pd
import pytest
from pydantic import ValidationError

from jouleroute.config import Params
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.build import check_exposure
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.energy import ExpectedEnergy
from jouleroute.gateway.limits import Admission, RateLimiter


def test_config_rejects_unknown_keys_and_inconsistent_upstreams():
    with pytest.raises(ValidationError, match="max_promt_tokens"):
        Params.model_validate({"gateway": {"limits": {"max_promt_tokens": 5}}})
    with pytest.raises(ValidationError, match="base_url"):
        GatewayConfig.model_validate({"upstreams": {"a": {"kind": "openai"}}})
    with pytest.raises(ValidationError, match="candidate"):
        GatewayConfig.model_validate({"router": {"kind": "always"}})
    assert Params.model_validate({}).gateway.host == "127.0.0.1"


def test_keys_come_from_file_and_env_and_only_hashes_are_kept(tmp_path, monkeypatch):
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# team keys\nplain-key\nsha256:{key_hash('hashed-key')}\n")
    monkeypatch.setenv("GW_KEYS", "env-key-1, env-key-2")
    store = KeyStore.load(GatewayConfig.model_validate(
        {"auth": {"keys_file": str(keys), "keys_env": "GW_KEYS"}}).auth)
    assert all(store.check(k) for k in ("plain-key", "hashed-key", "env-key-1", "env-key-2"))
    assert store.check("sha256:" + key_hash("hashed-key")) is None  # the hash is not itself a key
    assert store.check("other") is None and store.check(None) is None
    assert not any("key" in h for h in store.hashes)  # no plain key is stored
    bad = tmp_path / "bad.txt"
    bad.write_text("sha256:not-hex\n")
    with pytest.raises(ValueError, match="bad.txt:1"):
        KeyStore.load(GatewayConfig.model_validate({"auth": {"keys_file": str(bad), "keys_env": None}}).auth)


def test_an_open_gateway_must_stay_on_loopback():
    open_keys = KeyStore(set())
    check_exposure(GatewayConfig(), open_keys)
    with pytest.raises(ValueError, match="no API key"):
        check_exposure(GatewayConfig(host="0.0.0.0"), open_keys)
    check_exposure(GatewayConfig(host="0.0.0.0"), KeyStore({key_hash("k")}))
    check_exposure(GatewayConfig.model_validate({"host": "0.0.0.0", "auth": {"allow_anonymous": True}}), open_keys)


def test_rate_limiter_refills_per_key():
    now = [0.0]
    limiter = RateLimiter(rate_per_minute=60, burst=2, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(2)] == [None, None]
    assert limiter.take("a").wait_s == pytest.approx(1.0)  # one token per second
    assert limiter.take("b") is None  # keys do not share a bucket
    now[0] += 1.0
    assert limiter.take("a") is None


def test_rate_limiter_names_the_limit_that_was_hit():
    now = [0.0]
    limiter = RateLimiter(rate_per_minute=60, burst=10, clock=lambda: now[0])
    assert all(limiter.take("a") is None for _ in range(10))
    at_once = limiter.take("a")  # 11 requests in no time: the burst ran out
    assert at_once.limit == "burst" and "burst limit of 10 requests" in at_once.message
    assert "gateway.limits.burst" in at_once.message and "requests per minute" not in at_once.message
    now[0] = 100.0  # full again; 2 a second against a refill of 1: 19 requests in 9.5 s, the burst ran out
    assert _first_refusal(limiter, now, every_s=0.5).limit == "burst"
    now[0] = 200.0  # full again; 1.1 a second: the burst lasts 82 s, longer than a minute, so the rate was hit
    refused = _first_refusal(limiter, now, every_s=0.9)
    assert refused.limit == "rate_per_minute" and "rate limit of 60 requests per minute" in refused.message
    assert "gateway.limits.rate_per_minute" in refused.message


def _first_refusal(limiter, now, every_s):
    while True:
        now[0] += every_s
        refused = limiter.take("a")
        if refused is not None:
            return refused


def test_admission_is_bounded():
    admission = Admission(2)
    assert admission.enter() and admission.enter() and not admission.enter()
    admission.leave()
    assert admission.enter()


def test_expected_energy_scales_with_tokens_and_is_labelled():
    profile = pd.DataFrame({"candidate_id": ["a", "a"], "energy_j": [10.0, 30.0], "energy_source": "measured-nvml",
                            "input_tokens": [100, 100], "output_tokens": [10, 30]})
    expected = ExpectedEnergy.from_profile(profile, prefill_weight=0.1)
    energy, source = expected.estimate("a", input_tokens=100, output_tokens=20)
    assert source == "expected:measured-nvml"
    assert energy == pytest.approx(40.0 / 60.0 * 30.0)  # J per weighted token x (20 + 0.1 x 100)
    assert expected.estimate("unknown", 1, 1) == (None, "unavailable")
