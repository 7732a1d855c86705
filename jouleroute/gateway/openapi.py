"""The gateway's ``/openapi.json``: what each completion endpoint checks (body schema, energy-weight header, error
answers), read from the gateway serving now, so after a reload it describes the new one (its models, λ range,
limits and tasks)."""

from __future__ import annotations

import weakref
from typing import Callable

from fastapi import FastAPI

from jouleroute.gateway.protocol import Kind, request_schema

COMPLETION_KINDS: dict[str, Kind] = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}

# What a completion request can be answered with besides 200 (gateway/app.py's docstring; docs/gateway.md,
# "Security and limits")
ERRORS = {"400": "malformed JSON, a missing or wrong field, a prompt or max_tokens over the limits, an energy weight "
                 "outside the trained range", "401": "missing or invalid API key",
          "404": "a model not served here", "413": "the body exceeds limits.max_body_bytes",
          "429": "the key's rate limit (Retry-After)",
          "502": "the upstream failed, refused the gateway (its 401/403/429), or answered unreadably or with no text "
                 "(naming it)",
          "503": "the gateway is full (limits.max_pending; Retry-After)", "504": "the upstream timed out (naming it)"}

FEEDBACK_OPENAPI = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["request_id", "score"],
    "properties": {"request_id": {"type": "string", "description": "a served response's X-Request-Id"},
                   "score": {"type": "number", "minimum": 0, "maximum": 1},
                   "candidate": {"type": "string", "description": "the model scored (default: the one that answered)"}}}}}},
    "responses": {"202": {"description": "kept for the next tournament"}, "404": {"description": "unknown request_id"},
                  "422": {"description": "a missing request_id or a score outside [0, 1]"}}}


def openapi_operation(gw, kind: Kind) -> dict:
    """The request body, the energy-weight header and the error answers of a completion endpoint, for
    ``/openapi.json`` (the handlers read the raw body, so FastAPI cannot infer them)."""
    weight_range = tuple(gw.router.lambda_range) if gw.router is not None else None
    error = {"application/json": {"schema": {"type": "object", "required": ["error"], "properties": {
        "error": {"type": "object", "required": ["message", "type"],
                  "properties": {"message": {"type": "string"}, "type": {"type": "string"}}}}}}}
    header = {"type": "number"} | ({"minimum": weight_range[0], "maximum": weight_range[1]} if weight_range else {})
    return {
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": request_schema(kind, gw.models, weight_range, gw.cfg.limits.max_output_tokens,
                                     gw.router.known_tasks() if gw.router is not None else None)}}},
        "parameters": [{"name": "X-Energy-Weight", "in": "header", "required": False, "schema": header,
                        "description": "the energy weight λ (or the body's energy_weight)"}],
        "responses": {"200": {"description": "the answer (a JSON body, or an event stream when stream is true)"}}
        | {code: {"description": why, "content": error} for code, why in ERRORS.items()},
    }


def current_openapi(app: FastAPI, live) -> Callable[[], dict]:
    """``app.openapi`` for the ``LiveGateway`` ``live`` (gateway/reload.py): FastAPI keeps the document it built, so
    it is built again, with the completion operations of ``live.current``, whenever a reload has swapped the gateway
    since. The gateway described is held weakly: a retired gateway is not kept for its document."""
    described = [lambda: None]

    def openapi() -> dict:
        gw = live.current
        if described[0]() is not gw:
            for route in app.routes:
                kind = COMPLETION_KINDS.get(getattr(route, "path", None))
                if kind is not None:
                    route.openapi_extra = openapi_operation(gw, kind)
            app.openapi_schema, described[0] = None, weakref.ref(gw)
        return FastAPI.openapi(app)

    return openapi
