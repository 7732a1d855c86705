"""The learned LM router: a small causal LM that names a candidate, conditioned on λ.

``LMRouter(model_dir, meter)`` loads a checkpoint written by the sft or grpo stage
(``out_dir/model``: weights, tokenizer, router_spec.json) and routes batches of
queries with trie-constrained greedy decoding (``lm_decoding``), so every answer is a
pool member even from an untrained model. Its own cost is measured with the meter
passed in: one window per batch; each query's latency is the window (it waited for
the whole batch, as in the profile's ``latency_s``) and the window's energy is split
across the batch evenly or by prompt tokens (``RouterConfig.overhead_split``).
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd
import torch
from transformers import AutoModelForCausalLM

from jouleroute.energy.base import Measurement, Meter
from jouleroute.routing.base import Router, RoutingDecisions
from jouleroute.routing.lm_decoding import CandidateTrie, candidate_token_ids, constrained_choices
from jouleroute.training.common import load_tokenizer, resolve_device, set_threads, use_bf16
from jouleroute.training.config import RouterConfig
from jouleroute.training.prompts import RouterSpec, build_prompt

log = logging.getLogger(__name__)


class LMRouter(Router):
    """Routes with a fine-tuned LM; ``route(queries, lam=...)`` picks per query under weight λ."""

    name = "lm"

    def __init__(self, model_dir: str | Path, meter: Meter | None = None, cfg: RouterConfig | None = None):
        self.cfg = cfg or RouterConfig()
        self.model_dir = Path(model_dir)
        self.spec = RouterSpec.load(self.model_dir)
        super().__init__(self.spec.candidates)
        self.meter = meter
        set_threads(self.cfg.threads)  # process-wide, like the trainers' `threads`
        device = resolve_device(self.cfg.device)
        dtype = torch.bfloat16 if use_bf16(self.cfg.precision, device) else torch.float32
        self.tokenizer = load_tokenizer(self.model_dir, padding_side="left")
        self.model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=dtype).to(device).eval()
        self.trie = CandidateTrie(candidate_token_ids(self.tokenizer, self.candidates))
        if meter is None:
            log.warning("LMRouter has no meter: its overhead energy is reported as NaN (source 'none')")

    @contextmanager
    def _window(self) -> Iterator[list[Measurement]]:
        if self.meter is not None:
            with self.meter.window() as box:
                yield box
            return
        box: list[Measurement] = []
        start = time.perf_counter()
        try:
            yield box
        finally:
            box.append(Measurement(time_s=time.perf_counter() - start, energy_j=math.nan, source="none"))

    def prompts(self, queries: pd.DataFrame, lam: float) -> list[list[dict[str, str]]]:
        missing = [c for c in ("query_id", "question", "task") if c not in queries.columns]
        if missing:
            raise ValueError(f"queries frame lacks column(s) {missing}; LMRouter needs query_id, question, task")
        return [build_prompt(self.spec, str(q), str(t), lam) for q, t in zip(queries["question"], queries["task"])]

    def route(self, queries: pd.DataFrame, lam: float | None = None) -> RoutingDecisions:
        """One candidate per query under energy weight ``lam`` (default ``RouterConfig.lam``)."""
        lam = self.cfg.lam if lam is None else float(lam)
        if lam < 0:
            raise ValueError(f"energy weight lam must be >= 0, got {lam}")
        prompts = self.prompts(queries, lam)
        decisions = RoutingDecisions(query_ids=[str(q) for q in queries["query_id"]], candidate_ids=[],
                                     overhead_energy_source=self.meter.source if self.meter else "none")
        size = self.cfg.batch_size
        for start in range(0, len(prompts), size):
            with self._window() as box:
                choices, tokens = constrained_choices(self.model, self.tokenizer, prompts[start:start + size], self.trie)
            window = box[0]
            shares = self._shares(tokens)
            decisions.candidate_ids += choices
            decisions.overhead_latency_s += [window.time_s] * len(choices)
            decisions.overhead_energy_j += [window.energy_j * share for share in shares]
        return decisions

    def _shares(self, tokens: list[int]) -> list[float]:
        if self.cfg.overhead_split == "even" or sum(tokens) == 0:
            return [1.0 / len(tokens)] * len(tokens)
        total = float(sum(tokens))
        return [t / total for t in tokens]
