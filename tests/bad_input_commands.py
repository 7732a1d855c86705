"""The command cases of docs/bad-input.md's table (stage inputs and params files) and how one runs: a scratch
project with every stage's inputs up to evaluate's, the case's damage done to it, then the real CLI
(`jouleroute.cli.main`, in this process), which must exit 1 with one line and leave every file as it was.
tests/test_bad_input_commands.py runs each case; tests/test_bad_input_table.py regenerates the table.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
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


# --- the cases -----------------------------------------------------------------------------------------------

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
    Case("--params bad.yaml check-params", "a date where text is meant (`experiment: 2024-01-01`, unquoted)",
         params=_params_with(lambda p: p["tracking"].__setitem__("experiment", datetime.date(2024, 1, 1)))),
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
    Case("--params bad.yaml check-params", "a section given twice (YAML would keep the last silently)",
         params="router:\n  threads: 2\nrouter:\n  lam: 0.5\n"),
    Case("--params missing.yaml check-params", "no such file"),
    Case("serve --config bad.yaml", "a gateway config (`--config`) with a misspelled key",
         params="gateway:\n  hots: 0.0.0.0\n"),
    Case("serve --config bad.yaml", "a gateway config with a port written as text", params="port: \"8080\"\n"),
]


# --- a run ---------------------------------------------------------------------------------------------------

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
