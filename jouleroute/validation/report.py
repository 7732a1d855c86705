"""Turn Great Expectations results into a readable failure summary and an offline HTML page.

GE names the expectation that failed; this module adds what a person needs to
fix the data: the rule in plain words, the observed value, and a few offending
rows (from GE's partial_unexpected_index_list, or from pandas for table-level
checks such as a missing (query, candidate) pair, where GE has no rows to show).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field

import pandas as pd

KEY = ["query_id", "candidate_id"]


@dataclass
class FailedCheck:
    """One failed expectation, ready to print."""

    suite: str
    check: str  # schema | completeness | range | energy | consistency
    expectation: str  # GE expectation type, e.g. expect_column_values_to_be_between
    description: str  # the rule, in words
    column: str | None
    observed: str  # what GE saw, shortened
    unexpected_count: int | None
    examples: list[dict] = field(default_factory=list)

    def lines(self) -> list[str]:
        where = f"({self.column})" if self.column else ""
        count = "" if self.unexpected_count is None else f"; {self.unexpected_count} offending row(s)"
        out = [f"FAILED [{self.check}] {self.description} -- {self.expectation}{where}: {self.observed}{count}"]
        out += [f"    e.g. {_fmt_row(row)}" for row in self.examples]
        return out


def _fmt_row(row: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in row.items())


def _short(value: object, limit: int = 200) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _missing_pairs(df: pd.DataFrame, query_ids: list[str], candidate_ids: list[str], n: int) -> list[dict]:
    """(query, candidate) pairs of the expected grid that the profile lacks, first n."""
    if not set(KEY) <= set(df.columns):
        return []
    seen = set(zip(df["query_id"], df["candidate_id"]))
    out: list[dict] = []
    for q in sorted(query_ids):
        for c in sorted(candidate_ids):
            if (q, c) not in seen:
                out.append({"missing_query_id": q, "missing_candidate_id": c})
                if len(out) >= n:
                    return out
    return out


def failed_checks(
    suite_name: str,
    ge_result,
    frame: pd.DataFrame,
    query_ids: list[str],
    candidate_ids: list[str],
    n_examples: int,
) -> list[FailedCheck]:
    """Every unsuccessful expectation of one GE suite result, with example rows."""
    out: list[FailedCheck] = []
    for r in ge_result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        kwargs, res = cfg.kwargs, r.result or {}
        exc = r.exception_info or {}
        examples = list(res.get("partial_unexpected_index_list") or [])[:n_examples]
        if not examples and res.get("partial_unexpected_list"):
            examples = [{"value": v} for v in res["partial_unexpected_list"][:n_examples]]
        if isinstance(exc, dict) and exc.get("raised_exception"):
            observed = f"error: {exc.get('exception_message')}"
        elif "details" in res and "mismatched" in res["details"]:
            observed = f"columns {_short(res['details']['mismatched'])}"
        elif "observed_value" in res:
            observed = f"observed {_short(res['observed_value'])}"
            expected = kwargs.get("value_set")
            if cfg.type == "expect_column_distinct_values_to_equal_set" and expected is not None:
                seen = set(res["observed_value"] or [])
                missing, extra = sorted(set(expected) - seen), sorted(seen - set(expected))
                observed = f"missing {_short(missing)}, unexpected {_short(extra)}"
        else:
            observed = f"{res.get('unexpected_percent', 0):.2f}% of rows"
        if cfg.type == "expect_table_row_count_to_equal":
            examples = _missing_pairs(frame, query_ids, candidate_ids, n_examples)
        if cfg.type == "expect_column_unique_value_count_to_be_between" and kwargs.get("column") in frame:
            counts = frame[kwargs["column"]].value_counts()
            examples = [{kwargs["column"]: k, "rows": int(v)} for k, v in counts.items()][:n_examples]
        column = kwargs.get("column") or (
            ", ".join(kwargs["column_list"]) if "column_list" in kwargs
            else f"{kwargs['column_A']}, {kwargs['column_B']}" if "column_A" in kwargs else None
        )
        out.append(
            FailedCheck(
                suite=suite_name,
                check=(cfg.meta or {}).get("check", "other"),
                expectation=cfg.type,
                description=cfg.description or cfg.type,
                column=column,
                observed=observed,
                unexpected_count=res.get("unexpected_count"),
                examples=[{k: _jsonable(v) for k, v in row.items()} for row in examples],
            )
        )
    return out


def _jsonable(value: object) -> object:
    if hasattr(value, "item"):  # numpy scalar -> plain Python, so it prints as -1.5, not np.float64(-1.5)
        value = value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def failures_to_json(failures: list[FailedCheck]) -> list[dict]:
    return [asdict(f) for f in failures]


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.3em .6em;text-align:left}
.ok{color:#176d2c}.bad{color:#a4161a}code{background:#f3f3f3;padding:0 .2em}"""


def render_html(title: str, summary: str, failures: list[FailedCheck], checks: list[dict]) -> str:
    """A self-contained page (no CDN, no script) so the result reads offline."""
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1><pre>{esc(summary)}</pre>"]
    for f in failures:
        parts.append(f"<h3 class='bad'>{esc(f.description)}</h3><p><code>{esc(f.expectation)}</code> "
                     f"{esc(f.column or '')}: {esc(f.observed)}</p>")
        if f.examples:
            cols = list(dict.fromkeys(k for row in f.examples for k in row))
            parts.append("<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>")
            for row in f.examples:
                parts.append("<tr>" + "".join(f"<td>{esc(str(row.get(c, '')))}</td>" for c in cols) + "</tr>")
            parts.append("</table>")
    parts.append("<h2>All expectations</h2><table><tr><th>suite</th><th>check</th><th>rule</th><th>result</th></tr>")
    for c in checks:
        cls, word = ("ok", "passed") if c["success"] else ("bad", "FAILED")
        parts.append(f"<tr><td>{esc(c['suite'])}</td><td>{esc(c['check'])}</td><td>{esc(c['description'])}</td>"
                     f"<td class='{cls}'>{word}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)
