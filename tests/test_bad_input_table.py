"""docs/bad-input.md's table is what the commands print: every row's case runs here, and the table is generated from
these runs (`.venv/bin/python -m tests.test_bad_input_table` rewrites it; the test fails when it differs).

Each stage and params case runs the real CLI (`jouleroute.cli.main`, in this process) in a scratch project and
checks that it exits 1 with one line, and that no file of the project changed or appeared. Each gateway case sends
one request to the real app (FastAPI's test client, no server) and records the status and the error message (for
a stream that fails after it began, the 200 and the error event that ends it).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "bad-input.md"
BEGIN, END = "<!-- generated:bad-input:begin (tests/test_bad_input_table.py) -->", "<!-- generated:bad-input:end -->"
N_QUERIES = 4  # the scratch profile: 4 queries x the pool's candidates


# --- the scratch project --------------------------------------------------------------------------------------

LABELLED = "labels/profile.parquet"  # the labels stage's profile, what every later stage reads


def _queries() -> pd.DataFrame:
    return pd.DataFrame([dict(query_id=f"gsm8k/{i}", task="gsm8k", subtask="", split=split, question=f"q{i}",
                              choices_json="[]", gold="1", source_file="x.jsonl", source_row=i)
                         for i, split in enumerate(["train", "train", "val", "test"])])


def _profile(candidates: list[str]) -> pd.DataFrame:
    import pyarrow as pa

    from jouleroute.schema import PROFILE_SCHEMA

    rows = [dict(query_id=q.query_id, candidate_id=c, task=q.task, split=q.split, correct=i % 2, invalid=0,
                 extracted_answer="1", output_text="1", input_tokens=10, output_tokens=2, batch_size=1, latency_s=0.1,
                 ttft_s=None, energy_j=1.0 + j, energy_net_j=0.5 + j, idle_power_w=1.0, avg_power_w=10.0,
                 energy_source="estimated", energy_attribution="tokens", window_s=0.1, model_id=c,
                 backend="transformers", run_id="r")
            for i, q in enumerate(_queries().itertuples()) for j, c in enumerate(candidates)]
    return pa.Table.from_pandas(pd.DataFrame(rows), schema=PROFILE_SCHEMA, preserve_index=False)


def make_project(root: Path) -> Path:
    """params.yaml (tracking off), dvc.yaml, the data manifest, and every stage's inputs up to evaluate's, with a
    profile that passed validation (its report as `validate` writes it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy2(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "data").mkdir()
    shutil.copy2(REPO / "data/manifest.yaml", root / "data/manifest.yaml")
    art = root / "artifacts"
    for folder in ("prepare", "tournament", "labels", "validate", "router_data", "models", "sft/model", "grpo",
                   "budget"):
        (art / folder).mkdir(parents=True)
    _queries().to_parquet(art / "prepare/queries.parquet")
    profile = _profile([c["candidate_id"] for c in params["pool"]])
    pq.write_table(profile, art / "tournament/profile.parquet")
    # the labels stage's outputs: gold labels, every query kept
    pq.write_table(profile.append_column("label_source", pa.array(["gold"] * profile.num_rows)), art / LABELLED)
    (art / "labels/summary.json").write_text(json.dumps({"coverage": 1.0, "unlabelled_query_ids": []}))
    (art / "labels/quality.json").write_text(json.dumps({"measured": False}))
    (art / "tournament/run.json").write_text("{}\n")
    rows = N_QUERIES * len(params["pool"])
    _report(root, success=True, n_rows=rows)
    (art / "router_data/val.jsonl").write_text("")
    for name in ("budget.json", "budget.png"):
        (art / "budget" / name).write_text("")
    return root


def _report(root: Path, success: bool, n_rows: int) -> None:
    summary = (f"Profile validation {'passed' if success else 'FAILED (2 of 74 expectations)'}: "
               f"artifacts/{LABELLED} ({n_rows} rows)")
    (root / "artifacts/validate/report.json").write_text(json.dumps({"success": success, "n_rows": n_rows,
                                                                     "summary": summary}))


def _write(relative: str, content: bytes) -> Callable[[Path], None]:
    return lambda root: (root / relative).write_bytes(content)


def _remove(relative: str) -> Callable[[Path], None]:
    return lambda root: shutil.rmtree(root / relative) if (root / relative).is_dir() else (root / relative).unlink()


def _zero_rows(root: Path) -> None:
    import pyarrow.parquet as pq

    path = root / "artifacts" / LABELLED
    pq.write_table(pq.read_table(path).slice(0, 0), path)


def _drop_query_column(root: Path) -> None:
    _queries().drop(columns=["split"]).to_parquet(root / "artifacts/prepare/queries.parquet")


def _drop_profile_rows(root: Path) -> None:
    import pyarrow.parquet as pq

    path = root / "artifacts" / LABELLED
    pq.write_table(pq.read_table(path).slice(0, 2), path)


def _failed_validation(root: Path) -> None:
    _report(root, success=False, n_rows=N_QUERIES * 2)


def _no_data_root(root: Path) -> None:
    shutil.rmtree(root / "data/external", ignore_errors=True)


def _data_root_without_gsm8k(root: Path) -> None:
    (root / "data/external/benchmarks/mmlu").mkdir(parents=True)


CORRUPT = b"PAR1 this is not a parquet file, only its first four bytes are"


@dataclass(frozen=True)
class Case:
    command: str  # the arguments after `jouleroute`
    what: str  # the input and what is wrong with it
    setup: Callable[[Path], None] = lambda root: None
    params: str | None = None  # a params file's text (params cases), written as bad.yaml

    @property
    def argv(self) -> list[str]:
        return self.command.split()

    @property
    def name(self) -> str:
        """The command's name: its first word that is no option nor an option's value."""
        words = iter(self.argv)
        for word in words:
            if word in ("--params", "--config"):
                next(words, None)
            elif not word.startswith("-"):
                return word
        raise ValueError(self.command)


STAGE_CASES = [
    Case("prepare", "the data root `data/external/` missing (a clone without `make setup`)", _no_data_root),
    Case("prepare", "a dataset missing from the data root", _data_root_without_gsm8k),
    Case("labels", "the tournament's `profile.parquet` missing", _remove("artifacts/tournament/profile.parquet")),
    Case("labels", "the tournament's `profile.parquet` corrupt", _write("artifacts/tournament/profile.parquet",
                                                                        CORRUPT)),
    Case("validate", "`profile.parquet` missing", _remove("artifacts/" + LABELLED)),
    Case("validate", "`profile.parquet` empty (0 bytes)", _write("artifacts/" + LABELLED, b"")),
    Case("validate", "`profile.parquet` corrupt (not parquet)", _write("artifacts/" + LABELLED, CORRUPT)),
    Case("validate", "`profile.parquet` with 0 rows", _zero_rows),
    Case("validate", "`queries.parquet` without its `split` column (wrong schema)", _drop_query_column),
    Case("validate", "`run.json` (the tournament's record) not JSON", _write("artifacts/tournament/run.json",
                                                                             b"{not json")),
    Case("router_data", "`profile.parquet` corrupt", _write("artifacts/" + LABELLED, CORRUPT)),
    Case("router_data", "`profile.parquet` empty (0 bytes)", _write("artifacts/" + LABELLED, b"")),
    Case("router_data", "`profile.parquet` with 0 rows", _zero_rows),
    Case("router_data", "no validation (`artifacts/validate/` missing)", _remove("artifacts/validate")),
    Case("router_data", "no validation report (`report.json` missing)", _remove("artifacts/validate/report.json")),
    Case("router_data", "a profile that failed validation", _failed_validation),
    Case("router_data", "a profile changed since it was validated (other rows)", _drop_profile_rows),
    Case("sft", "the router datasets missing (`router_data` not run)", _remove("artifacts/router_data")),
    Case("grpo", "the SFT checkpoint missing", _remove("artifacts/sft")),
    Case("budget", "the GRPO checkpoint missing", _remove("artifacts/grpo")),
    Case("sft", "a profile that failed validation", _failed_validation),
    Case("grpo", "a profile that failed validation", _failed_validation),
    Case("budget", "a profile that failed validation", _failed_validation),
    Case("evaluate", "a profile that failed validation", _failed_validation),
    Case("evaluate", "`profile.parquet` empty (0 bytes)", _write("artifacts/tournament/profile.parquet", b"")),
    Case("evaluate", "`queries.parquet` corrupt", _write("artifacts/prepare/queries.parquet", CORRUPT)),
]


def _params_with(edit: Callable[[dict], None]) -> str:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    edit(params)
    return yaml.safe_dump(params, sort_keys=False)


PARAMS_CASES = [
    Case("--params bad.yaml check-params", "a misspelled section", params=_params_with(
        lambda p: p.__setitem__("evalute", p.pop("evaluate")))),
    Case("--params bad.yaml check-params", "a misspelled key", params=_params_with(
        lambda p: p["pool"][0].__setitem__("max_new_token", 16))),
    Case("--params bad.yaml check-params", "an integer written as text", params=_params_with(
        lambda p: p["tournament"].__setitem__("seed", "7"))),
    Case("--params bad.yaml check-params", "a boolean written as text", params=_params_with(
        lambda p: p["evaluate"].__setitem__("plots", "yes"))),
    Case("--params bad.yaml check-params", "a value out of range (λ outside the trained range)", params=_params_with(
        lambda p: p["router"].__setitem__("lam", 5.0))),
    Case("--params bad.yaml check-params", "a key that moved", params=_params_with(
        lambda p: p["baselines"].__setitem__("lam", 0.5))),
    Case("--params bad.yaml check-params", "routers scored on the split the champion is chosen on", params=_params_with(
        lambda p: p["evaluate"].__setitem__("split", "val"))),
    Case("--params bad.yaml check-params", "baselines fitted on the split they are scored on", params=_params_with(
        lambda p: p["baselines"].__setitem__("train_split", "test"))),
    Case("--params bad.yaml check-params", "an empty file", params=""),
    Case("--params bad.yaml check-params", "a list, not a mapping of sections", params="- prepare\n- tournament\n"),
    Case("--params bad.yaml check-params", "not YAML", params="prepare: [unclosed\n"),
    Case("--params missing.yaml check-params", "no such file"),
    Case("serve --config bad.yaml", "a gateway config (`--config`) with a misspelled key",
         params="gateway:\n  hots: 0.0.0.0\n"),
    Case("serve --config bad.yaml", "a gateway config with a port written as text", params="port: \"8080\"\n"),
]


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_cli_case(case: Case, root: Path) -> tuple[str, dict, dict]:
    """(the one line printed, the files before, the files after) of ``case`` run in a fresh project at ``root``,
    the working directory."""
    import contextlib
    import io

    from jouleroute.cli import main

    make_project(root)
    case.setup(root)
    if case.params is not None:
        (root / "bad.yaml").write_text(case.params)
    before = _snapshot(root)
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        status = main(case.argv)
    err = stderr.getvalue()
    assert status == 1, (case, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, (case, err)
    return lines[0], before, _snapshot(root)


# --- the gateway ----------------------------------------------------------------------------------------------

API_KEY = "bad-input-key-0123456789"
UPSTREAM_URL = "http://127.0.0.1:8002/v1"  # how the table shows the hanging upstream's base_url
AUTH = {"Authorization": f"Bearer {API_KEY}"}
GOOD = {"model": "jouleroute-auto", "prompt": "what is 1 plus 2", "max_tokens": 4}
DEFAULT_BODY = {"max_body_bytes": 1_000_000}  # gateway.limits' default, for the cases larger than the table's 4096
MID_STREAM = "200, then an error event"  # a stream's status is sent with its first text; its error comes last


@dataclass(frozen=True)
class Request:
    what: str
    body: object = field(default_factory=lambda: GOOD)
    headers: dict = field(default_factory=lambda: AUTH)
    path: str = "/v1/completions"
    content: bytes | None = None
    limits: dict = field(default_factory=dict)  # this case's gateway.limits overrides
    tries: int = 1  # the last answer is recorded (a rate limit needs a few)
    # the upstreams: "silent" accepts connections and never answers, "refused" has nothing listening, "empty"
    # answers 200 with no text, "failing" answers 500; "cut" and "stall" stream two chunks of text, then drop the
    # connection ("cut") or say nothing more ("stall")
    upstream: str = "silent"
    busy: bool = False  # another request holds the gateway's one admission slot meanwhile (limits.max_pending: 1)


GATEWAY_CASES = [
    Request("no API key", headers={}),
    Request("a wrong API key", headers={"Authorization": "Bearer nope"}),
    Request("a body that is not JSON", body=None, content=b'{"model": "jouleroute-auto", "prompt": '),
    Request("a body that is not an object", body=["jouleroute-auto"]),
    Request("no `model`", body={"prompt": "hi"}),
    Request("a chat without `messages`", body={"model": "jouleroute-auto"}, path="/v1/chat/completions"),
    Request("a batch of prompts", body=GOOD | {"prompt": ["a", "b"]}),
    Request("`max_tokens` not a positive integer", body=GOOD | {"max_tokens": 0}),
    Request("`max_tokens` over the gateway's limit", body=GOOD | {"max_tokens": 100_000}),
    Request("`max_tokens` over the limit beside a `max_completion_tokens` within it (both are checked; the larger "
            "counts)", body=GOOD | {"max_completion_tokens": 4, "max_tokens": 100_000}),
    Request("`stream` not a boolean", body=GOOD | {"stream": "yes"}),
    Request("`stream_options` not an object", body=GOOD | {"stream_options": True}),
    Request("`task` not a string", body=GOOD | {"task": 3}),
    Request("a task the router was not trained on", body=GOOD | {"task": "arithh"}),
    Request("an energy weight that is no number", body=GOOD | {"energy_weight": "lots"}),
    Request("an energy weight outside the trained range", headers=AUTH | {"X-Energy-Weight": "5"}),
    Request("two different energy weights", body=GOOD | {"energy_weight": 1}, headers=AUTH | {"X-Energy-Weight": "0"}),
    Request("an energy weight that is an integer too large for a float", body=GOOD | {"energy_weight": 10 ** 400}),
    Request("an integer past Python's 4,300 digits (at the default `limits.max_body_bytes`)", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": "hi", "max_tokens": ' + b"9" * 5000 + b"}",
            limits=DEFAULT_BODY),
    Request("JSON nested 100,000 deep (at the default `limits.max_body_bytes`)", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            limits=DEFAULT_BODY),
    Request("an unpaired surrogate escape", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": "\\ud800", "max_tokens": 4}'),
    Request("a prompt over `limits.max_prompt_tokens`", body=GOOD | {"prompt": "word " * 200}),
    Request("a body over `limits.max_body_bytes`", body=GOOD | {"prompt": "x" * 5000}),
    Request("a model not served here", body=GOOD | {"model": "gpt-9"}),
    Request("a key over its burst limit", limits={"burst": 1, "rate_per_minute": 1}, tries=2,
            body=GOOD | {"max_tokens": 0}),
    Request("an upstream that does not answer in time"),
    Request("an upstream that refuses the connection", upstream="refused"),
    Request("an upstream that fails (500)", upstream="failing"),
    Request("an upstream that answers with no text", upstream="empty"),
    Request("a stream whose upstream drops the connection after its first text", body=GOOD | {"stream": True},
            upstream="cut"),
    Request("a stream whose upstream falls silent after its first text, past its timeout",
            body=GOOD | {"stream": True}, upstream="stall"),
    Request("the gateway full (`limits.max_pending` requests already pending)", limits={"max_pending": 1}, busy=True),
]


class _Upstream:
    """A loopback upstream that misbehaves as ``mode`` says (see ``Request.upstream``)."""

    def __init__(self, mode: str) -> None:
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.sock, self.server = socket.socket(), None
        self.released = threading.Event()  # ends a "stall" upstream's silence when the case is over
        self.sock.bind(("127.0.0.1", 0))
        self.port = port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        if mode == "silent":
            self.sock.listen(64)
        elif mode == "refused":
            self.sock.close()
        elif mode in ("cut", "stall"):
            self.sock.close()
            released = self.released

            class Handler(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"  # a chunked body, so that a dropped connection is a cut-off stream

                def do_POST(self):  # noqa: N802 (http.server's name)
                    model = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))["model"]
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for word in ("Hello", " there"):
                        chunk = {"id": "c", "object": "text_completion", "created": 0, "model": model,
                                 "choices": [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}]}
                        event = f"data: {json.dumps(chunk)}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        time.sleep(0.1)  # each chunk read on its own: the stream has begun before it breaks
                    if mode == "stall":
                        released.wait(60)
                    self.close_connection = True  # no last chunk: the body ends unfinished

                def log_message(self, *args):
                    pass

            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
        else:
            self.sock.close()
            status, body = (500, {"error": {"message": "out of memory"}}) if mode == "failing" else \
                (200, {"id": "x", "object": "text_completion", "model": "tiny", "choices": [
                    {"index": 0, "text": "", "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}})

            class Handler(BaseHTTPRequestHandler):
                def do_POST(self):  # noqa: N802 (http.server's name)
                    self.rfile.read(int(self.headers.get("content-length") or 0))
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

                def log_message(self, *args):
                    pass

            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        self.sock.close()


def run_gateway_case(case: Request) -> tuple[str, str]:
    """(status, error message) of ``case`` sent to a gateway over a kNN router trained on task 'arith' (it picks
    `large` at the default weight) with two upstreams, `small` and `large`, that misbehave as the case says; most
    requests are refused before an upstream is asked. A stream that failed after it began is ``MID_STREAM``, with
    the message of the error event that ended it (after the text that came, and with no ``[DONE]``)."""
    import threading
    import time

    from fastapi.testclient import TestClient

    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.auth import KeyStore, key_hash
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream
    from jouleroute.gateway.service import Gateway
    from tests.gateway.conftest import synthetic_profile

    silent = _Upstream(case.upstream)
    try:
        limits = {"max_prompt_tokens": 64, "max_body_bytes": 4096} | case.limits
        cfg = GatewayConfig.model_validate({"limits": limits})
        expected = ExpectedEnergy.from_profile(synthetic_profile()[0], prefill_weight=0.1)
        upstreams = {c: RemoteUpstream(c, silent.url, f"tiny-{c}", expected, timeout_s=2 if case.busy else 0.5,
                                       connect_timeout_s=0.5) for c in ("small", "large")}
        gateway = Gateway(cfg, _knn_router(), upstreams, KeyStore({key_hash(API_KEY)}))
        with TestClient(create_app(gateway)) as client:
            if case.busy:  # a first request waits on the silent upstream, holding the one admission slot
                holder = threading.Thread(target=client.post, args=("/v1/completions",),
                                          kwargs={"headers": AUTH, "json": GOOD})
                holder.start()
                deadline = time.monotonic() + 10
                while gateway.admission.pending == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
            for _ in range(case.tries):
                kwargs = {"content": case.content} if case.content is not None else {"json": case.body}
                response = client.post(case.path, headers=case.headers, **kwargs)
            if case.busy:
                holder.join()
        assert response.headers["x-request-id"], case
        if response.headers["content-type"].startswith("text/event-stream"):
            events = [json.loads(line[5:]) if line[5:].strip() != "[DONE]" else "[DONE]"
                      for line in response.text.splitlines() if line.startswith("data:")]
            assert response.status_code == 200 and "[DONE]" not in events, (case, events)
            # the first text at least (a cut connection may take the text still in transit with it)
            assert "".join(e["choices"][0]["text"] for e in events[:-1]) in ("Hello", "Hello there"), (case, events)
            assert events[-1]["error"]["code"] == "upstream_failed", (case, events)
            status, message = MID_STREAM, events[-1]["error"]["message"]
        else:
            status, message = str(response.status_code), response.json()["error"]["message"]
        # the upstream's address is the scratch port's: shown as a served upstream's would be
        message = message.replace(silent.url, UPSTREAM_URL)
        return status, message.replace(str(silent.port), UPSTREAM_URL.split(":")[-1].split("/")[0])
    finally:
        silent.close()


_ROUTER = []


def _knn_router():
    """The kNN router of tests/gateway/conftest.py (trained on task 'arith', λ in [0, 2]), built once."""
    if not _ROUTER:
        from jouleroute.energy.estimate import EstimateMeter
        from jouleroute.gateway.routers import ScoringGatewayRouter
        from jouleroute.routing.baselines.config import BaselinesConfig
        from jouleroute.routing.registry import build_router
        from tests.gateway.conftest import CANDIDATES, synthetic_profile

        profile, queries = synthetic_profile()
        cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 8})
        router = build_router("knn", profile, queries, CANDIDATES, cfg, meter=EstimateMeter())
        _ROUTER.append(ScoringGatewayRouter(router, lambda_range=(0.0, 2.0), default_lam=0.0))
    return _ROUTER[0]


# --- the table ------------------------------------------------------------------------------------------------

def _cell(text: str) -> str:
    """``text`` as a table cell's code span: double backticks, so the backticks a message holds stay inside."""
    return "`` " + text.replace("|", "\\|") + " ``"


ROW = re.compile(r"^\| (.+?) \| (.+?) \| `` (.*) `` \|$")


def documented() -> dict[tuple[str, str], str]:
    """(command or request, input or status) -> the line, from docs/bad-input.md's generated block."""
    rows = {}
    for line in block(DOC.read_text()).splitlines():
        match = ROW.match(line)
        if match:
            first, second, shown = match.groups()
            rows[(first, second)] = shown.replace("\\|", "|")
    return rows


def same(a: str, b: str) -> bool:
    """Equal but for durations (a rate limit's "1 in 0.0 s" is measured)."""
    return re.sub(r"\d+\.\d+ s\b", "# s", a) == re.sub(r"\d+\.\d+ s\b", "# s", b)


def render(stage_lines: list[str], params_lines: list[str], gateway: list[tuple[str, str]]) -> str:
    out = ["### Stage inputs", "", "Run in the project root; paths are the defaults of `paths:`.", "",
           "| command | input | what you see (stderr, exit status 1) |", "|---|---|---|"]
    out += [f"| `jouleroute {c.command}` | {c.what} | {_cell(line)} |" for c, line in zip(STAGE_CASES, stage_lines)]
    out += ["", "### Params", "", "`jouleroute check-params` here; every command that reads the params file prints "
            "the same line (after its own name), and `make run` stops there before DVC starts.", "",
            "| command | params file | what you see (stderr, exit status 1) |", "|---|---|---|"]
    out += [f"| `jouleroute {c.command}` | {c.what} | {_cell(line)} |" for c, line in zip(PARAMS_CASES, params_lines)]
    out += ["", "### Gateway requests", "", "`POST /v1/completions` (or `/v1/chat/completions`) to `jouleroute serve` "
            "with the limits `max_prompt_tokens: 64`, `max_body_bytes: 4096` and a router trained on the task "
            "`arith`; the answer is OpenAI's error shape, "
            "`{\"error\": {\"message\": ..., \"type\": ..., \"code\": ...}}`, "
            f"with an `X-Request-Id` header. The hanging upstream is `{UPSTREAM_URL}`. A stream's status (200) is "
            "sent with its first text: an upstream that fails after that ends the stream with an error event in the "
            "same shape, `data: {\"error\": {...}}`, after the text that came and in place of `data: [DONE]`.", "",
            "| request | status | `error.message` |", "|---|---|---|"]
    out += [f"| {c.what} | {status} | {_cell(message)} |" for c, (status, message) in zip(GATEWAY_CASES, gateway)]
    return "\n".join(out)


def block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


# --- the tests ------------------------------------------------------------------------------------------------

REGENERATE = "docs/bad-input.md differs from what runs: .venv/bin/python -m tests.test_bad_input_table rewrites it"


@pytest.mark.parametrize("case", STAGE_CASES + PARAMS_CASES, ids=lambda c: f"{c.name}: {c.what}")
def test_each_bad_input_is_one_line_and_changes_nothing(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line, before, after = run_cli_case(case, tmp_path)
    assert line.startswith(f"jouleroute {case.name}: "), line
    assert after == before, "the refused command changed or added files"
    assert documented().get((f"`jouleroute {case.command}`", case.what)) == line, REGENERATE


@pytest.mark.parametrize("case", GATEWAY_CASES, ids=lambda c: c.what)
def test_each_bad_request_gets_its_status_and_one_message(case):
    status, message = run_gateway_case(case)
    streaming = isinstance(case.body, dict) and case.body.get("stream") is True
    assert (status == MID_STREAM if streaming else 400 <= int(status) < 600), status
    assert "\n" not in message
    assert same(documented().get((case.what, status), ""), message), REGENERATE


def test_the_table_lists_every_case_and_nothing_else():
    """The generated block is exactly the cases' rows (a removed case leaves no stale row behind)."""
    expected = {(f"`jouleroute {c.command}`", c.what) for c in STAGE_CASES + PARAMS_CASES}
    assert {key for key in documented() if key[0].startswith("`jouleroute")} == expected, REGENERATE
    assert [what for what, _ in documented() if not what.startswith("`jouleroute")] == \
        [c.what for c in GATEWAY_CASES], REGENERATE


def main() -> int:
    """Rewrite docs/bad-input.md's generated block from fresh runs of every case."""
    import tempfile

    import os

    stage_lines, params_lines, cwd = [], [], os.getcwd()
    try:
        for cases, lines in ((STAGE_CASES, stage_lines), (PARAMS_CASES, params_lines)):
            for case in cases:
                with tempfile.TemporaryDirectory() as folder:
                    os.chdir(folder)
                    lines.append(run_cli_case(case, Path(folder))[0])
                    os.chdir(cwd)
    finally:
        os.chdir(cwd)
    gateway = [run_gateway_case(case) for case in GATEWAY_CASES]
    text = DOC.read_text()
    new = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + render(stage_lines, params_lines, gateway) + "\n" + \
        text[text.index(END):]
    DOC.write_text(new)
    print(f"{DOC.relative_to(REPO)}: {len(stage_lines) + len(params_lines) + len(gateway)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
