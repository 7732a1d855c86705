"""Stage `validate`: check a profile with Great Expectations before anything learns from it.

``run_validate`` runs two suites in an ephemeral GE context: one on the profile
itself (schema, completeness of the query x candidate grid, value ranges, energy
labels) and, when the query table is given, one on the profile joined to it
(each row's task and split agree with its query). It always writes
``out_dir/report.json`` (GE results + summary) and ``out_dir/report.html`` (a
self-contained page that reads offline), plus GE's own data docs under
``out_dir/data_docs/`` (their styling comes from a CDN), then raises
``ValidationError`` if anything failed, so every caller (CLI, DVC, Prefect)
exits non-zero with the same readable summary.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from jouleroute.validation.config import LabelCheck, ValidateConfig
from jouleroute.validation.report import FailedCheck, failed_checks, failures_to_json, render_html

log = logging.getLogger(__name__)


@dataclass
class ValidationResult:
    """Outcome of ``run_validate``; ``summary()`` is what the CLI prints."""

    success: bool
    profile_path: Path
    n_rows: int
    n_expectations: int
    failures: list[FailedCheck]
    report_path: Path
    html_path: Path
    data_docs_index: Path | None
    checks: list[dict] = field(default_factory=list)

    def summary(self) -> str:
        head = "passed" if self.success else f"FAILED ({len(self.failures)} of {self.n_expectations} expectations)"
        lines = [f"Profile validation {head}: {self.profile_path} ({self.n_rows} rows)"]
        for failure in self.failures:
            lines += failure.lines()
        lines.append(f"Full result: {self.report_path} ; readable page: {self.html_path}")
        return "\n".join(lines)


class ValidationError(Exception):
    """The profile failed validation; ``str(err)`` is the summary, ``err.result`` the details."""

    def __init__(self, result: ValidationResult):
        super().__init__(result.summary())
        self.result = result


def _read_parquet(path: Path, what: str) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path} (run the stage that writes it first)")
    # a fresh positional index: rows are reported by (query_id, candidate_id), and a file saved
    # with a duplicated pandas index must not make one "row" stand for several
    return pd.read_parquet(path).reset_index(drop=True)


def _query_table(queries_path: Path) -> pd.DataFrame:
    queries = _read_parquet(queries_path, "query table")
    missing = {"query_id", "task", "split"} - set(queries.columns)
    if missing:
        raise ValueError(f"{queries_path}: query table lacks column(s) {sorted(missing)}")
    return queries[["query_id", "task", "split"]]


def run_validate(
    profile_path: Path,
    out_dir: Path,
    cfg: ValidateConfig,
    queries_path: Path | None = None,
    candidate_ids: list[str] | None = None,
    power_limit_w: float | None = None,
    allow_mixed_sources: bool = False,
    expected_query_ids: list[str] | None = None,
    fractional_correct: bool = False,
    labels: LabelCheck | None = None,
) -> ValidationResult:
    """Validate the profile at ``profile_path``; write results under ``out_dir``.

    ``queries_path`` (the query table) fixes the expected set of queries; without
    it the profile's own query ids are taken. ``candidate_ids`` likewise fixes the
    expected candidates (the pool). ``power_limit_w`` bounds ``avg_power_w`` when
    the hardware states a limit. ``allow_mixed_sources`` (params ``energy_policy``) accepts a
    profile whose rows carry several energy_source labels. Raises ``ValidationError`` on failure unless
    ``cfg.raise_on_failure`` is False. ``expected_query_ids``: the queries of the table the tournament profiled,
    when it ran only some (``grpo.reward_source: live``; its run.json lists them). ``fractional_correct``: an
    imported profile, whose ``correct`` may be an expected correctness in [0, 1] (a tournament's is 0/1).
    ``labels``: the profile is labelled (stage ``labels``): its ``label_source`` and coverage are checked too.
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    # Imported here, not at module top: GE takes ~6 s to import and the CLI
    # imports this module for every command.
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # GE forces this module's logger to INFO at import; let it inherit the application's level instead
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.NOTSET)

    from jouleroute.validation.suite import (coverage_expectations, cross_expectations, label_expectations,
                                             plausibility_expectations, plausibility_frame, profile_expectations)

    profile_path, out_dir = Path(profile_path), Path(out_dir)
    profile = _read_parquet(profile_path, "profile")
    queries = _query_table(Path(queries_path)) if queries_path is not None else None
    if queries is not None and expected_query_ids is not None:  # the tournament profiled only these (live GRPO)
        queries = queries[queries["query_id"].isin(set(expected_query_ids))]
    if queries is not None:
        query_ids = sorted(set(queries["query_id"]))
    else:
        query_ids = sorted(set(profile["query_id"].dropna())) if "query_id" in profile else []
    if candidate_ids is not None:
        cand_ids = sorted(set(candidate_ids))
    else:
        cand_ids = sorted(set(profile["candidate_id"].dropna())) if "candidate_id" in profile else []

    out_dir.mkdir(parents=True, exist_ok=True)
    docs_dir = out_dir / "data_docs"
    shutil.rmtree(docs_dir, ignore_errors=True)  # data docs accumulate runs; keep only this one

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    if cfg.data_docs:
        ctx.add_data_docs_site(
            site_name="validate",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    source = ctx.data_sources.add_pandas("jouleroute")
    index_cols = ["query_id", "candidate_id"] if {"query_id", "candidate_id"} <= set(profile.columns) else []
    result_format = {"result_format": "SUMMARY", "partial_unexpected_count": cfg.example_rows,
                     "unexpected_index_column_names": index_cols}

    frames = {"profile": (profile, profile_expectations(
        list(profile.columns), query_ids, cand_ids, allow_mixed_sources, power_limit_w, fractional_correct,
        label_column=labels is not None) + (label_expectations(labels.allow_mixed) if labels else []))}
    if labels is not None:
        frames["label_coverage"] = (pd.DataFrame({"coverage": [labels.coverage]}),
                                    coverage_expectations(labels.min_coverage))
    if queries is not None and {"query_id", "candidate_id", "task", "split"} <= set(profile.columns):
        joined = profile[["query_id", "candidate_id", "task", "split"]].merge(
            queries.rename(columns={"task": "query_task", "split": "query_split"}), on="query_id", how="left")
        frames["profile_vs_queries"] = (joined, cross_expectations())
    generated = plausibility_frame(profile)
    if generated is not None and len(generated) and cfg.min_j_per_output_token > 0:
        frames["energy_plausibility"] = (generated, plausibility_expectations(cfg.min_j_per_output_token))

    failures: list[FailedCheck] = []
    ge_json: dict[str, dict] = {}
    checks: list[dict] = []
    n_expectations = 0
    for name, (frame, expectations) in frames.items():
        batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
        # Build the suite whole, then register it: add_expectation on a registered
        # suite re-saves (deep-copies) it every time, ~0.1 s per expectation.
        suite = ctx.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
        definition = ctx.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
        ge_result = definition.run(batch_parameters={"dataframe": frame}, result_format=result_format)
        ge_json[name] = ge_result.to_json_dict()
        n_expectations += len(ge_result.results)
        checks += [{"suite": name, "check": (r.expectation_config.meta or {}).get("check", "other"),
                    "description": r.expectation_config.description or r.expectation_config.type,
                    "success": bool(r.success)} for r in ge_result.results]
        failures += failed_checks(name, ge_result, frame, query_ids, cand_ids, cfg.example_rows)

    docs_index = None
    if cfg.data_docs:
        docs_index = Path(ctx.build_data_docs(site_names=["validate"])["validate"].removeprefix("file://"))
    result = ValidationResult(
        success=not failures,
        profile_path=profile_path,
        n_rows=len(profile),
        n_expectations=n_expectations,
        failures=failures,
        report_path=out_dir / "report.json",
        html_path=out_dir / "report.html",
        data_docs_index=docs_index if docs_index is not None and docs_index.is_file() else None,
        checks=checks,
    )
    report = {
        "success": result.success,
        "profile": str(profile_path),
        "queries": None if queries_path is None else str(queries_path),
        "n_rows": result.n_rows,
        "n_expected_queries": len(query_ids),
        "expected_candidates": cand_ids,
        "power_limit_w": power_limit_w,
        "config": cfg.model_dump(),
        "allow_mixed_sources": allow_mixed_sources,
        "summary": result.summary(),
        "failures": failures_to_json(failures),
        "checks": checks,
        "great_expectations": ge_json,
    }
    result.report_path.write_text(json.dumps(report, indent=2, default=str))
    result.html_path.write_text(render_html("jouleroute profile validation", result.summary(), failures, checks))
    if result.success:
        log.info("profile %s passed %d expectations", profile_path, n_expectations)
    elif cfg.raise_on_failure:
        raise ValidationError(result)
    return result
