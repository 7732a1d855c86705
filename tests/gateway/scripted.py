"""A backend that answers from a script, for the cascade's loopback upstreams: the real OpenAI-compatible server
(jouleroute/backends/serve.py) over it gives the gateway real HTTP answers whose content the test decides."""

from __future__ import annotations

from jouleroute.backends.base import Backend, GenRequest, GenResult


class ScriptedBackend(Backend):
    """Replies with ``replies[key]`` for the first ``key`` found in the prompt (or the last user message), else
    ``default``; token counts are the words of the prompt and of the reply (at least one)."""

    name = "scripted"

    def __init__(self, model_id: str, replies: dict[str, str], default: str = "I do not know.") -> None:
        self.model_id, self.replies, self.default = model_id, replies, default
        self.asked: list[str] = []  # every prompt, in order

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        results = []
        for request in requests:
            prompt = request.prompt if request.prompt is not None else str(request.messages[-1].get("content", ""))
            self.asked.append(prompt)
            text = next((reply for key, reply in self.replies.items() if key in prompt), self.default)
            results.append(GenResult(text, max(len(prompt.split()), 1), max(len(text.split()), 1), 0.0,
                                     finish_reason="stop"))
        return results
