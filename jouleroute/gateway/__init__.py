"""``jouleroute serve``: an OpenAI-compatible gateway that routes each request by its energy weight.

Modules: ``config`` (typed params), ``routers`` (the one routing interface and adapters),
``upstreams`` (OpenAI-compatible servers, in-process models), ``energy`` (expected energy
from the profile), ``auth`` and ``limits``, ``metrics``, ``protocol`` (the wire format),
``service`` (routing and fallback), ``cascade`` (stages that read the answers, with ``answers``: the task-free
extractor), ``app`` (FastAPI) and ``build`` (from params).
Imports stay light here: params loading imports ``config`` on every command.
"""
