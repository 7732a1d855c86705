"""In-process vLLM (``vllm.LLM``), imported only when asked for.

vLLM 0.33 pins torch, transformers and fastapi versions that conflict with this project's
environment, so it lives in its own environment. There, either use this backend, or run
``vllm serve`` and point the ``openai`` backend at it.
"""

from __future__ import annotations

import time

from jouleroute.backends.base import Backend, GenRequest, GenResult

VLLM_MISSING = (
    "backend.kind='vllm' but the `vllm` package is not importable here. vLLM pins torch/transformers "
    "versions that cannot share jouleroute's environment: install it in its own environment "
    "(pip install vllm) and run jouleroute from there, or run `vllm serve <model>` and use "
    "backend.kind='openai' with backend.base_url pointing at it."
)


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, location: str, dtype: str = "auto", seed: int = 0, **engine_args) -> None:
        try:
            import vllm
        except ImportError as error:
            raise ImportError(VLLM_MISSING) from error
        self._vllm = vllm
        self.model_id = location
        self._llm = vllm.LLM(model=location, dtype=dtype, seed=seed, **engine_args)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        if not requests:
            return []
        params = [
            self._vllm.SamplingParams(temperature=0.0, max_tokens=r.max_new_tokens, stop=list(r.stop) or None)
            for r in requests
        ]
        chat_rows = [i for i, r in enumerate(requests) if r.messages is not None]
        text_rows = [i for i, r in enumerate(requests) if r.messages is None]
        outputs: dict[int, object] = {}
        started = time.perf_counter()
        if chat_rows:
            conversations = [requests[i].messages for i in chat_rows]
            done = self._llm.chat(conversations, [params[i] for i in chat_rows], use_tqdm=False)
            outputs |= dict(zip(chat_rows, done))
        if text_rows:
            prompts = [requests[i].prompt for i in text_rows]
            done = self._llm.generate(prompts, [params[i] for i in text_rows], use_tqdm=False)
            outputs |= dict(zip(text_rows, done))
        latency_s = time.perf_counter() - started
        results = []
        for i in range(len(requests)):
            out = outputs[i]
            completion = out.outputs[0]
            finish = "stop" if completion.finish_reason == "stop" else "length"
            # vLLM exposes no per-request first-token time through LLM.generate; ttft_s stays None.
            n_in, n_out = len(out.prompt_token_ids), len(completion.token_ids)
            results.append(GenResult(completion.text, n_in, n_out, latency_s, None, finish))
        return results

    def close(self) -> None:
        self._llm = None
