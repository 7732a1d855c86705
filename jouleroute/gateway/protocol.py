"""The OpenAI wire format as the gateway reads and writes it: request checks, bodies, chunks, receipts."""

from __future__ import annotations

import json
import math
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["chat", "completion"]
# Fields the gateway reads and never forwards (sent by clients as extra_body).
GATEWAY_FIELDS = ("energy_weight", "task")
WEIGHT_HEADER = "x-energy-weight"


class GatewayError(Exception):
    """An answer other than 200, in OpenAI's error shape."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 headers: dict[str, str] | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type_, code
        self.headers, self.param = headers or {}, param  # param: the request field at fault, where one is

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}


@dataclass
class ParsedRequest:
    kind: Kind
    body: dict  # what goes upstream: the client's fields less the gateway's own
    model: str
    stream: bool
    include_usage: bool
    max_tokens: int | None
    route_text: str  # what the router reads
    all_text: str  # every prompt character, for the token limit
    task: str
    weight: float | None  # from the body (extra_body)
    max_tokens_asked: int | None = None  # the larger of max_tokens and max_completion_tokens: what the limit checks
    choices: int = 1  # n: the limit counts every choice's output tokens


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def parse_request(raw: bytes, kind: Kind) -> ParsedRequest:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:  # ValueError: also an integer past Python's 4,300 digits
        digits = re.search(r"value has (\d+) digits", str(error))
        if digits and not isinstance(error, json.JSONDecodeError):  # valid JSON, but Python reads no such integer
            raise GatewayError(400, f"the request body holds an integer of {digits[1]} digits; at most "
                                    f"{sys.get_int_max_str_digits()} are read: send a smaller number") from None
        raise GatewayError(400, f"the request body is not valid JSON: {error}") from None
    except RecursionError:  # e.g. [[[[...]]]] thousands deep: the parser's own limit, not the gateway's fault
        raise GatewayError(400, "the request body is not valid JSON: nested too deeply to read") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "the request body must be a JSON object")
    _check_unicode(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayError(400, "'model' is required: 'jouleroute-auto' or a candidate id (GET /v1/models)")
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            raise GatewayError(400, "'messages' must be a non-empty list of {role, content} objects")
        texts = [_text(m.get("content")) for m in messages]
        users = [t for m, t in zip(messages, texts) if m["role"] == "user"]
        route_text, all_text = (users[-1] if users else texts[-1]), "\n".join(texts)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = body["prompt"] = prompt[0]
        if not isinstance(prompt, str):
            raise GatewayError(400, "'prompt' must be one string (batched prompts are not supported)")
        route_text = all_text = prompt
    asked = {}
    for key in ("max_tokens", "max_completion_tokens"):  # both checked: an upstream may read either
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer() and value >= 1:  # 64.0 is an integer in JSON's terms
            value = body[key] = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise GatewayError(400, f"{key} must be a positive integer, got {value!r}")
        asked[key] = value
    # the newer field wins where both are sent (OpenAI's rule); the limit applies to the larger
    max_tokens = asked.get("max_completion_tokens", asked.get("max_tokens"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise GatewayError(400, f"'stream' must be true or false, got {stream!r}")
    task = body.get("task", "")
    if not isinstance(task, str):
        raise GatewayError(400, f"'task' must be a string, got {task!r}")
    weight = parse_weight(body["energy_weight"], "the body field energy_weight") if "energy_weight" in body else None
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise GatewayError(400, f"'stream_options' must be an object such as {{\"include_usage\": true}}, got {options!r}")
    include_usage = bool((options or {}).get("include_usage"))
    choices = _sampling_checked(body)
    _drop_empty_stops(body)
    upstream = {k: v for k, v in body.items() if k not in GATEWAY_FIELDS}
    return ParsedRequest(kind, upstream, model, stream, include_usage, max_tokens, route_text, all_text, task, weight,
                         max(asked.values(), default=None), choices)


def _sampling_checked(body: dict) -> int:
    """``stop``, ``temperature`` and ``n`` as OpenAI takes them (a wrong type was an upstream's 502, or a silent
    stop on a dict's key); the number of choices asked, whose output tokens the limit counts together."""
    stop = body.get("stop")
    if stop is not None and not (isinstance(stop, str) or isinstance(stop, list)
                                 and all(isinstance(s, str) for s in stop)):
        raise GatewayError(400, f"'stop' must be a string or a list of strings, got {stop!r}")
    temperature = body.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or not 0 <= temperature <= 2):
        raise GatewayError(400, f"'temperature' must be a number from 0 to 2, got {temperature!r}")
    n = body.get("n", 1)
    if isinstance(n, float) and n.is_integer():
        n = body["n"] = int(n)
    if n is None:
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise GatewayError(400, f"'n' must be a positive integer, got {n!r}")
    return n


def _drop_empty_stops(body: dict) -> None:
    """An empty stop string stops nothing, yet upstreams disagree on it: jouleroute's own server refuses one, the
    in-process path ignores it. Dropped here, for every upstream alike (a ``stop`` list keeps its other strings;
    with none left, no ``stop`` is sent)."""
    stop = body.get("stop")
    if stop == "" or (isinstance(stop, list) and "" in stop):
        kept = [s for s in stop if s != ""] if isinstance(stop, list) else []
        if kept:
            body["stop"] = kept
        else:
            del body["stop"]


def _check_unicode(body: dict) -> None:
    """A JSON string may escape half a UTF-16 surrogate pair (``"\\ud800"``): Python reads it, but no tokenizer, log
    line or upstream body can encode it as UTF-8. Refused here, as the request's fault, before anything reads it."""
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError as error:
        bad = error.object[error.start:error.end]
        raise GatewayError(400, f"the request body is not valid Unicode: it escapes an unpaired surrogate "
                                f"({bad.encode('unicode_escape').decode()}); send UTF-8 text") from None
    except RecursionError:
        raise GatewayError(400, "the request body is not valid JSON: nested too deeply to read") from None


def parse_weight(value, where: str) -> float:
    try:
        weight = float(value)
    except OverflowError:  # an integer too large for a float (JSON integers have no size limit)
        raise GatewayError(400, f"{where} must be a finite number, got an integer of {value.bit_length()} bits") \
            from None
    except (TypeError, ValueError):
        raise GatewayError(400, f"{where} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(weight):
        raise GatewayError(400, f"{where} must be a finite number, got {value!r}")
    return weight


def request_schema(kind: Kind, models: list[str], weight_range: tuple[float, float] | None,
                   max_output_tokens: int | None = None, tasks: list[str] | None = None) -> dict:
    """The JSON schema of a request body as ``parse_request`` reads it, for the gateway's OpenAPI document
    (``/openapi.json``): the fields the gateway checks, typed as it checks them; any other field is passed to the
    upstream as it came. ``models``: the served ones (another is a 404); ``weight_range``: the router's trained
    λ range (outside it, a 400); ``max_output_tokens``: the gateway's limit on ``max_tokens`` (above it, a 400);
    ``tasks``: the tasks the router knows (another is a 400), when it names them."""
    weight = {"type": "number"} | ({"minimum": weight_range[0], "maximum": weight_range[1]} if weight_range else {})
    part = {"type": "object", "properties": {"type": {"type": "string"}, "text": {"type": "string"}}}
    tokens = {"type": "integer", "minimum": 1} | ({"maximum": max_output_tokens} if max_output_tokens else {})
    common = {
        "model": {"type": "string", "enum": models} if models else {"type": "string", "minLength": 1},
        "max_tokens": tokens,
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "n": {"type": "integer", "minimum": 1, "description": "choices; the output limit counts them all"},
        "energy_weight": weight | {"description": "the energy weight λ (or the X-Energy-Weight header)"},
        "task": {"type": "string", "description": "a task the router was trained on"}
        | ({"enum": ["", *tasks]} if tasks else {}),
    }
    if kind == "chat":
        message = {"type": "object", "required": ["role", "content"],
                   "properties": {"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                                  "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": part}]}}}
        own = {"messages": {"type": "array", "minItems": 1, "items": message},
               "max_completion_tokens": tokens}
        required = ["model", "messages"]
    else:
        own = {"prompt": {"anyOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1}]}}
        required = ["model", "prompt"]
    return {"type": "object", "required": required, "properties": common | own}


def new_id(kind: Kind) -> str:
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"


def completion_body(kind: Kind, model: str, text: str, finish: str, prompt_tokens: int, completion_tokens: int) -> dict:
    base = {"id": new_id(kind), "created": int(time.time()), "model": model}
    if kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    return base | {"object": obj, "choices": [choice], "usage": usage}


def body_chunks(body: dict, kind: Kind) -> list[dict]:
    """A whole answer as stream chunks: the content, then the finish reason, then usage."""
    base = {k: body[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk" if kind == "chat" else "text_completion"
    choice = body["choices"][0]
    if kind == "chat":
        first = {"index": 0, "delta": {"role": "assistant", "content": choice["message"]["content"]},
                 "finish_reason": None}
        last = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    else:
        first = {"index": 0, "text": choice["text"], "logprobs": None, "finish_reason": None}
        last = {"index": 0, "text": "", "logprobs": None, "finish_reason": choice["finish_reason"]}
    return [base | {"choices": [first]}, base | {"choices": [last]}, base | {"choices": [], "usage": body["usage"]}]


def has_text(body: dict) -> bool:
    """Whether an answer (a whole body or one stream chunk) holds something to read: text that is not only
    whitespace, or a tool call. A base model that stops at once (its stop string first) answers ''."""
    for choice in body.get("choices") or []:
        part = choice.get("message") or choice.get("delta") or {}
        text = part.get("content") if "message" in choice or "delta" in choice else choice.get("text")
        if _text(text).strip() or part.get("tool_calls") or part.get("function_call"):
            return True
    return False


def sse(obj: dict | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


@dataclass
class Receipt:
    """What a request cost and who answered: the ``usage.jouleroute`` extension and the headers."""

    candidate: str
    lam: float | None  # None: the client named the candidate, no routing
    router: str = "none"
    router_wall_s: float = 0.0  # time the request spent being routed (queue + pass)
    router_compute_s: float = 0.0  # the router pass itself
    router_energy_j: float = 0.0
    router_energy_source: str = "none"
    energy_j: float | None = None
    energy_source: str = "pending"
    answer_s: float = 0.0
    fallback_from: list[str] = field(default_factory=list)
    counted: bool = False  # the answer's joules and tokens are already in /metrics (a cascade counts each call)

    def usage(self) -> dict:
        return {"candidate": self.candidate, "energy_weight": self.lam, "energy_j": self.energy_j,
                "energy_source": self.energy_source, "answer_latency_s": round(self.answer_s, 6),
                "router": {"name": self.router, "latency_s": round(self.router_wall_s, 6),
                           "compute_s": round(self.router_compute_s, 6), "energy_j": self.router_energy_j,
                           "energy_source": self.router_energy_source},
                "fallback_from": self.fallback_from}

    def headers(self) -> dict[str, str]:
        h = {"X-Jouleroute-Candidate": self.candidate, "X-Jouleroute-Router": self.router,
             "X-Jouleroute-Router-Latency-S": f"{self.router_wall_s:.6f}",
             "X-Jouleroute-Router-Energy-J": f"{self.router_energy_j:.6g}",
             "X-Jouleroute-Router-Energy-Source": self.router_energy_source,
             "X-Jouleroute-Energy-Source": self.energy_source}
        if self.lam is not None:
            h["X-Jouleroute-Energy-Weight"] = f"{self.lam:g}"
        if self.energy_j is not None:
            h["X-Jouleroute-Energy-J"] = f"{self.energy_j:.6g}"
        if self.fallback_from:
            h["X-Jouleroute-Fallback-From"] = ",".join(self.fallback_from)
        return h
