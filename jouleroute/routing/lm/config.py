"""Typed params of LM-router inference (the ``router`` section of params.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jouleroute.routing.scores import DEFAULT_LAM
from jouleroute.strict import StrictModel

# auto: bf16 on CUDA, fp32 on CPU (reproducible on any CPU: what evaluation uses); native: bf16 wherever the
# hardware multiplies it natively (CUDA, a CPU with AMX or AVX512-BF16), fp32 elsewhere (the gateway's default)
Precision = Literal["auto", "fp32", "bf16", "native"]
Device = Literal["auto", "cpu", "cuda"]


class RouterConfig(StrictModel):
    """Inference with a trained router (jouleroute.routing.lm.router.LMRouter)."""

    batch_size: int = Field(default=16, ge=1)
    # the reference λ: route()'s default, where a router named in gateway.router is served, where the page and
    # `jouleroute where` quote a swept family, and the LM mix the random rule copies. The deployed λ is not this
    # one: evaluate chooses it on selection data for `target` (evaluation/deployed.py)
    lam: float = Field(default=DEFAULT_LAM, ge=0)
    # how a batch window's energy is split across its queries (latency: each query waited the window)
    overhead_split: Literal["even", "tokens"] = "tokens"
    device: Device = "auto"
    precision: Precision = "auto"
    # torch CPU threads while routing (null: torch's default). On a 2-core box shared with
    # another job two threads made CPU generation slower than one (benchmarks/README.md).
    threads: int | None = Field(default=None, ge=1)
    # int8: torch dynamic quantization of the decoder's linear layers (CPU only; the label head stays
    # fp32); auto: int8 on CPU, none on CUDA. Agreement with fp32 is tested on a tiny model
    # (tests/routing/test_fast_router.py); "none" stays the default until experiments/router_levers.py has
    # measured the agreement of trained routers on the visible pools' val splits.
    quantize: Literal["auto", "none", "int8"] = "none"
