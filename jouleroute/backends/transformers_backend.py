"""In-process batched generation with transformers, on CPU or CUDA.

Requests are tokenized one by one (chat template for ``messages``), left-padded into one
batch and decoded greedily. Each row is then cut at its own EOS, stop string or
``max_new_tokens``, so a request's result does not depend on what it was batched with.
"""

from __future__ import annotations

import logging
import time

from jouleroute.backends.base import Backend, GenRequest, GenResult, LoglikRequest, best_normalized, cut_at_stop
from jouleroute.backends.loglik import batch_logliks
from jouleroute.provenance import seed_everything

logger = logging.getLogger(__name__)

SEED = 0


class TransformersBackend(Backend):
    name = "transformers"

    def __init__(
        self,
        location: str,
        device: str = "auto",
        dtype: str = "float32",
        torch_threads: int | None = None,
        model=None,
        tokenizer=None,
    ) -> None:
        """Load from ``location`` (a save_pretrained folder), or take a ready ``model``/``tokenizer``."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if torch_threads:
            torch.set_num_threads(torch_threads)
        seed_everything(SEED)
        from jouleroute.torch_env import resolve_device  # imports torch: only when a backend is built

        self.device = resolve_device(device)
        self.model_id = location
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(location)
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype)
        self.model = model.to(self.device).eval()
        config = self.model.generation_config
        eos = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
        # A row ends at the generation config's EOS or the tokenizer's, whichever comes first.
        self.eos_ids = set(eos + [self.tokenizer.eos_token_id]) - {None}
        # Rows are cut at their own EOS, stop string or length before counting, so pad never reaches a result.
        pads = [self.tokenizer.pad_token_id, config.pad_token_id, min(self.eos_ids)]
        self.pad_id = next(p for p in pads if p is not None)

    def encode(self, request: GenRequest) -> list[int]:
        """Token ids of the request as the model sees them."""
        if request.messages is not None:
            if not getattr(self.tokenizer, "chat_template", None):
                raise ValueError(
                    f"model {self.model_id} has no chat template; "
                    "send a plain `prompt` (few-shot) instead of `messages`"
                )
            text = self.tokenizer.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=False)
            # The template already holds any BOS token; adding special tokens again would double it.
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.tokenizer(request.prompt)["input_ids"]

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        import torch

        if not requests:
            return []
        encoded = [self.encode(r) for r in requests]
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        first_token = _FirstTokenClock()
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                max_new_tokens=max(r.max_new_tokens for r in requests),
                do_sample=False,
                num_beams=1,
                pad_token_id=self.pad_id,
                stopping_criteria=[first_token, _RowStops(self.tokenizer, width, requests, self.eos_ids)],
                # Greedy: the model's own sampling defaults (top_p, temperature) must not warn or apply.
                temperature=None,
                top_p=None,
                top_k=None,
            )
        if self.device == "cuda":
            torch.cuda.synchronize()
        latency_s = time.perf_counter() - started
        ttft_s = first_token.at - started if first_token.at is not None else None
        generated = output[:, width:].tolist()
        return [
            self._finish(ids, request, len(prompt_ids), latency_s, ttft_s)
            for ids, request, prompt_ids in zip(generated, requests, encoded)
        ]

    def _finish(self, ids: list[int], request: GenRequest, n_input: int, latency_s: float, ttft_s) -> GenResult:
        ids = ids[: request.max_new_tokens]
        end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_ids), None)
        finish = "stop" if end is not None else "length"
        ids = ids[:end] if end is not None else ids
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        text, stopped = cut_at_stop(text, request.stop)
        if stopped:
            ids = ids[: self._tokens_to_stop(ids, request.stop)]
            finish = "stop"
        return GenResult(text, n_input, len(ids), latency_s, ttft_s, finish)

    def _tokens_to_stop(self, ids: list[int], stop: list[str]) -> int:
        """Fewest leading tokens whose text already contains a stop string (binary search)."""
        low, high = 1, len(ids)
        while low < high:
            mid = (low + high) // 2
            if cut_at_stop(self.tokenizer.decode(ids[:mid], skip_special_tokens=True), stop)[1]:
                high = mid
            else:
                low = mid + 1
        return low

    def loglik(self, requests: list[LoglikRequest]) -> list[GenResult]:
        """Two batched passes for the whole batch: contexts, then continuations on their cache (loglik.py)."""
        import torch

        started = time.perf_counter()
        if not requests:
            return []
        scored = batch_logliks(self.model, self.tokenizer, requests, self.device)
        if self.device == "cuda":
            torch.cuda.synchronize()
        latency_s = time.perf_counter() - started
        return [GenResult(f"Answer: {r.labels[best_normalized(lls, r.continuations)]}", n_tokens, 0, latency_s,
                          None, "stop")
                for r, (lls, n_tokens) in zip(requests, scored)]

    def close(self) -> None:
        self.model = None
        if self.device == "cuda":
            import torch

            torch.cuda.empty_cache()


class _FirstTokenClock:
    """A stopping criterion that never stops: it notes when the first new token exists (TTFT)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        if self.at is None:
            if input_ids.is_cuda:
                torch.cuda.synchronize()
            self.at = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class _RowStops:
    """Ends each row at its *own* stop strings, EOS tokens and ``max_new_tokens``.

    transformers' ``stop_strings`` applies one list to the whole batch and pre-scans the
    whole vocabulary (seconds for a 262k vocabulary); this check decodes only each row's
    last few tokens. A finished row is padded from then on, so it costs no more decoding.
    """

    def __init__(self, tokenizer, prompt_width: int, requests: list[GenRequest], eos_ids: set[int]) -> None:
        self.tokenizer = tokenizer
        self.prompt_width = prompt_width
        self.stops = [r.stop for r in requests]
        self.max_new = [r.max_new_tokens for r in requests]
        self.eos_ids = eos_ids
        # A token decodes to at least one character except for partial UTF-8 bytes, so this
        # many trailing tokens always cover the longest stop string.
        self.tail = max((len(s) for r in requests for s in r.stop), default=0) + 8

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        generated = input_ids.shape[1] - self.prompt_width
        # One device-to-host copy per step for the whole batch, not one per row.
        tails = input_ids[:, input_ids.shape[1] - min(generated, self.tail) :].tolist()
        flags = []
        for tail, stop, max_new in zip(tails, self.stops, self.max_new):
            if generated >= max_new or (tail and tail[-1] in self.eos_ids):
                flags.append(True)
            elif stop:
                flags.append(cut_at_stop(self.tokenizer.decode(tail, skip_special_tokens=True), stop)[1])
            else:
                flags.append(False)
        return torch.tensor(flags, dtype=torch.bool, device=input_ids.device)
