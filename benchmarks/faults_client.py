"""The client side of benchmarks/bench_faults.py: one request read to its end, the class it falls in, the gateway's
access log checked against the requests, and the gateway's ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path


async def send(session, url: str, body: dict, headers: dict, limit_s: float) -> dict:
    """One request, read to its end: status, headers, and for a stream what arrived (content, [DONE], an error
    event); ``hang`` when it has not ended within ``limit_s``."""
    import aiohttp

    record = {"stream": bool(body.get("stream")), "status": None, "headers": {}, "content": False, "done": False,
              "error_event": None, "body": None, "transport": None, "hang": False}
    sent = time.perf_counter()
    try:
        async with asyncio.timeout(limit_s):
            async with session.post(url, json=body, headers=headers) as r:
                record["status"], record["headers"] = r.status, {k.lower(): v for k, v in r.headers.items()}
                if r.status != 200 or not record["stream"]:
                    record["body"] = await r.text()
                else:
                    async for raw in r.content:
                        line = raw.decode().strip()
                        if not line.startswith("data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            record["done"] = True
                            continue
                        event = json.loads(payload)
                        if "error" in event:
                            record["error_event"] = event["error"].get("message", "")
                        elif any(c.get("text") or (c.get("delta") or {}).get("content")
                                 for c in event.get("choices") or []):
                            record["content"] = True
    except TimeoutError:
        record["hang"] = True
    except (aiohttp.ClientError, ValueError) as error:
        record["transport"] = f"{type(error).__name__}: {error}"
    record["latency_s"] = time.perf_counter() - sent
    record["ended_at"] = time.perf_counter()
    return record


def classify(r: dict, victim: str) -> str:
    named = f"'{victim}' at http://"  # how the gateway names an upstream (RemoteUpstream.where)
    if r["hang"]:
        return "hang"
    if r["transport"] is not None:
        return "other"
    if r["status"] == 200:
        if r["stream"]:
            if r["error_event"] is not None:
                return "clean_error" if named in r["error_event"] else "other"
            if not (r["done"] and r["content"]):
                return "other"
        else:
            try:
                body = json.loads(r["body"])
                text = body["choices"][0]["text"]
            except (ValueError, KeyError, IndexError, TypeError):
                return "other"
            if not text:
                return "other"
        fell = r["headers"].get("x-jouleroute-fallback-from")
        return "fallback" if fell == victim else "answered" if fell is None else "other"
    if r["status"] in (502, 504):
        try:
            message = json.loads(r["body"])["error"]["message"]
        except (ValueError, KeyError, TypeError):
            return "other"
        return "clean_error" if named in message else "other"
    return "other"


def records_check(log: Path, request_ids: list[str | None], sent: int) -> dict:
    """The access log against the requests: one line each, none twice."""
    # one JSON object a line, bare or behind logging.basicConfig's "INFO:jouleroute.gateway.access:" prefix
    lines = [json.loads(line[line.index("{"):]) for line in log.read_text().splitlines()
             if line.startswith("{") or line.startswith("INFO:jouleroute.gateway.access:{")]
    ids = Counter(line["request_id"] for line in lines if line["route"].startswith("/v1/"))
    seen = [i for i in request_ids if i]
    return {"requests": sent, "access_log_lines": sum(ids.values()),
            "duplicated": sum(n - 1 for n in ids.values() if n > 1),
            "missing": sent - len(ids), "responses_without_request_id": sent - len(seen),
            "response_ids_not_in_log": sum(1 for i in seen if i not in ids)}


def get_text(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=10).text


def metric_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
