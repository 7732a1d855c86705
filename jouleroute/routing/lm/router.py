"""The learned LM router: a small causal LM that scores the pool in one forward pass.

``LMRouter(model_dir, meter)`` loads a checkpoint written by the sft or grpo stage
(``out_dir/model``: weights, tokenizer, router_spec.json). ``score(queries)`` reads each
query once (batched, sorted by length) and keeps the label scores; ``route(queries, lam)``
decides at any λ of the trained range from those scores, so a λ sweep costs one pass.
Every prompt opens with the chat template's system turn; its keys and values are computed once
and reused by every batch (``SharedPrefix``; no switch in ``RouterConfig``: it changes no score
beyond float rounding). Its own cost is measured with the meter passed in: one window per batch;
each query's latency is its batch's window and the window's energy is split across the batch evenly
or by prompt tokens (``RouterConfig.overhead_split``).
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForCausalLM

from jouleroute.energy.base import Measurement, Meter
from jouleroute.routing.base import Router, RoutingDecisions, Scores
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.scoring import SharedPrefix, common_prefix, label_logits, length_batches
from jouleroute.routing.lm.spec import RouterSpec, label_token_ids, prompt_ids
from jouleroute.torch_env import inference_dtype, load_tokenizer, resolve_device, set_threads

log = logging.getLogger(__name__)


def quantize_decoder(model):
    """int8 dynamic quantization of the decoder's linear layers, in place; embeddings and head stay fp32.

    The label head is applied as a slice of the (tied) embedding matrix (``label_logits``), so it must
    remain a plain weight; the decoder's matrices are where the time goes.
    """
    import warnings

    with warnings.catch_warnings():  # torch points to torchao for new code; this API still does the job
        warnings.simplefilter("ignore")
        model.base_model.layers = torch.ao.quantization.quantize_dynamic(
            model.base_model.layers, {torch.nn.Linear}, dtype=torch.qint8)
    return model


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
        dtype = inference_dtype(self.cfg.precision, device)
        self.tokenizer = load_tokenizer(self.model_dir, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=dtype).to(device).eval()
        self.quantized = self.cfg.quantize == "int8" or (self.cfg.quantize == "auto" and device == "cpu")
        if self.quantized:
            if device != "cpu":
                raise ValueError("router.quantize: int8 is CPU-only (torch dynamic quantization); use none or auto")
            model = quantize_decoder(model)
        self.model = model
        self.label_ids = label_token_ids(self.tokenizer, self.spec.labels, self.spec.candidates)
        self.prefix = self._shared_prefix()
        self.default_lam = self.cfg.lam
        self._last: tuple[tuple[tuple[str, ...], bool], Scores] | None = None
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

    def prompts(self, queries: pd.DataFrame) -> list[list[int]]:
        missing = [c for c in ("query_id", "question", "task") if c not in queries.columns]
        if missing:
            raise ValueError(f"queries frame lacks column(s) {missing}; LMRouter needs query_id, question, task")
        return [prompt_ids(self.spec, self.tokenizer, str(q), str(t))
                for q, t in zip(queries["question"], queries["task"])]

    def _shared_prefix(self) -> SharedPrefix | None:
        """The tokens every prompt starts with: what prompts of unlike queries share.

        The probes open differently (letter, digit, space, newline, punctuation, non-Latin), so a
        tokenizer that merges the user header's last characters with the query's first stops the
        prefix before them. Prompts are checked against it token by token when scored, so a prompt
        that does not start with it is scored in full, never wrongly.
        """
        probes = ["a", "Z 1", "7", " x", "\n\n?", "(", "«", "問"]
        tokens = common_prefix([prompt_ids(self.spec, self.tokenizer, p, "") for p in probes])
        return SharedPrefix(tokens) if tokens else None

    def score(self, queries: pd.DataFrame, progress=None) -> Scores:
        """Label logits of every query as merit (one forward pass each, batched), cost = the task's
        normalized TRAIN energy, scale = the spec's logits per unit of utility. The last batch is memoized, keyed
        on the queries and on whether a meter is attached: scores taken unmetered never stand in for metered ones
        (the deployment meters the router's own cost on val after val was scored without a meter)."""
        ids = tuple(str(q) for q in queries["query_id"])
        key = (ids, self.meter is not None)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        prompts = self.prompts(queries)
        n, size = len(prompts), self.cfg.batch_size
        scores = np.zeros((n, len(self.candidates)))
        latency, energy = [0.0] * n, [0.0] * n
        pad, skip = self.tokenizer.pad_token_id, len(self.prefix) if self.prefix is not None else 0
        # what each row computes: the tokens after the cached prefix, or all of them
        computed = [len(p) - skip if skip and self.prefix.fits(p) else len(p) for p in prompts]
        for batch in length_batches(computed, size):  # similar lengths share a batch: little padding
            with self._window() as box:
                scores[batch] = label_logits(self.model, [prompts[i] for i in batch], self.label_ids, pad,
                                             self.prefix)
            window = box[0]
            shares = self._shares([len(prompts[i]) for i in batch])
            for i, share in zip(batch, shares):
                latency[i], energy[i] = window.time_s, window.energy_j * share
            if progress is not None:
                progress(len(batch))
        tasks = [str(t) for t in queries["task"]]
        width = len(self.candidates)
        result = Scores(
            query_ids=list(ids), candidates=list(self.candidates), merit=scores,
            cost=np.array([self.spec.energy_row(t) for t in tasks]).reshape(n, width),
            energy_j=np.array([self.spec.energy_j_row(t) for t in tasks]).reshape(n, width),
            scale=self.spec.utility_scale, overhead_latency_s=latency, overhead_energy_j=energy,
            overhead_energy_source=self.meter.source if self.meter else "none")
        self._last = (key, result)
        return result

    def route(self, queries: pd.DataFrame, lam: float | None = None) -> RoutingDecisions:
        """One candidate per query under energy weight ``lam`` (default ``RouterConfig.lam``)."""
        lam = self.spec.check_lambda(self.cfg.lam if lam is None else float(lam))
        return self.score(queries).decide(lam)

    def _shares(self, tokens: list[int]) -> list[float]:
        if self.cfg.overhead_split == "even" or sum(tokens) == 0:
            return [1.0 / len(tokens)] * len(tokens)
        total = float(sum(tokens))
        return [t / total for t in tokens]
