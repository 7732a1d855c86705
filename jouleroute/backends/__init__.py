"""Generation backends behind one interface: transformers (in-process), OpenAI-compatible HTTP, vLLM."""

from jouleroute.backends.base import Backend, GenRequest, GenResult, LoglikRequest, answer_requests, cut_at_stop
from jouleroute.backends.config import BackendConfig
from jouleroute.backends.factory import make_backend

__all__ = ["Backend", "BackendConfig", "GenRequest", "GenResult", "LoglikRequest", "answer_requests", "cut_at_stop", "make_backend"]
