"""The Great Expectations suites that a profile must pass before anything learns from it.

Each expectation carries a ``description`` (what must hold, in plain words) and
``meta["check"]`` (the family it belongs to: schema, completeness, range,
energy, labels). The summary printed on failure is built from those two fields, so a
failing stage says *what* is wrong, not only which GE class fired.
"""

from __future__ import annotations

import pyarrow as pa
import great_expectations as gx

from jouleroute.schema import ENERGY_SOURCES, FRACTIONAL_PROFILE_SCHEMA, PROFILE_SCHEMA, SPLITS

E = gx.expectations

# Same pattern as CandidateSpec.candidate_id, so a profile cannot name a candidate
# that the pool config could never have declared.
CANDIDATE_ID_REGEX = r"^[a-z0-9][a-z0-9._-]*$"

# Lower bounds per numeric column: (min_value, strict). energy_net_j has none on
# purpose: idle subtraction can push a short window to or below zero.
_LOWER_BOUNDS: dict[str, tuple[float, bool]] = {
    "energy_j": (0.0, True),
    "latency_s": (0.0, True),
    "window_s": (0.0, True),
    "ttft_s": (0.0, False),
    "idle_power_w": (0.0, False),
    "input_tokens": (0.0, False),
    "output_tokens": (0.0, False),
    "batch_size": (1.0, False),
}

# A window's average power can read above the device's limit: NVML's energy counter moves in steps of about
# 0.1 s, so a 0.15 s window at the cap reads up to about 1.33x (a 1 s one about 1.05x). The bound is there to
# catch a meter that is wrong (a unit slip reads 1000x), not a short window: 1.5x the limit.
METER_STEP_ROOM = 1.5


def _dtype_name(field: pa.Field) -> str:
    """The pandas dtype a column gets when the parquet file follows PROFILE_SCHEMA."""
    if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
        # pandas 3 reads strings as dtype `str`; ExpectColumnValuesToBeOfType("str")
        # accepts it (ExpectColumnValuesToBeInTypeList does not), and on an object
        # column it checks that each value is a Python str.
        return "str"
    return field.type.to_pandas_dtype().__name__  # int8, int64, float64


def _expect(expectation, check: str, description: str):
    expectation.description = description
    expectation.meta = {"check": check}
    return expectation


def profile_expectations(
    present_columns: list[str],
    expected_query_ids: list[str],
    expected_candidate_ids: list[str],
    allow_mixed_sources: bool,
    power_limit_w: float | None,
    fractional_correct: bool = False,
    label_column: bool = False,
) -> list:
    """Every expectation on the profile table itself.

    ``label_column``: a labelled profile (stage ``labels``), which has a ``label_source`` column besides
    PROFILE_SCHEMA's (its own expectations: ``label_expectations``).

    ``fractional_correct`` (an imported profile): ``correct`` is an expected correctness in [0, 1], int8 0/1
    or float64 (schema.FRACTIONAL_PROFILE_SCHEMA); a live tournament's profile keeps 0/1 in int8.

    Column-level expectations are only added for columns that exist: a missing
    column is reported once, by the column-set expectation, instead of as a
    cascade of errors from every check that touches it.
    """
    present = set(present_columns)
    out = [
        _expect(
            E.ExpectTableColumnsToMatchSet(column_set=list(PROFILE_SCHEMA.names) + ["label_source"] * label_column,
                                           exact_match=True),
            "schema",
            "the profile has exactly the PROFILE_SCHEMA columns" + (" and label_source" * label_column)
            + " (in any order)",
        ),
        _expect(E.ExpectTableRowCountToBeBetween(min_value=1), "completeness", "the profile has at least one row"),
    ]
    for field in PROFILE_SCHEMA:
        if field.name not in present:
            continue
        dtype = _dtype_name(field)
        if fractional_correct and field.name == "correct":
            kinds = [dtype, _dtype_name(FRACTIONAL_PROFILE_SCHEMA.field("correct"))]
            out.append(_expect(E.ExpectColumnValuesToBeInTypeList(column="correct", type_list=kinds), "schema",
                               f"column correct has dtype {' or '.join(kinds)}"))
        else:
            out.append(
                _expect(
                    E.ExpectColumnValuesToBeOfType(column=field.name, type_=dtype),
                    "schema",
                    f"column {field.name} has dtype {dtype}",
                )
            )
        if not field.nullable:
            out.append(
                _expect(
                    E.ExpectColumnValuesToNotBeNull(column=field.name),
                    "schema",
                    f"column {field.name} has no missing values",
                )
            )
        if field.name in _LOWER_BOUNDS:
            low, strict = _LOWER_BOUNDS[field.name]
            out.append(
                _expect(
                    E.ExpectColumnValuesToBeBetween(column=field.name, min_value=low, strict_min=strict),
                    "range",
                    f"{field.name} {'>' if strict else '>='} {low:g}",
                )
            )

    def has(*cols: str) -> bool:
        return all(c in present for c in cols)

    if has("avg_power_w"):
        ceiling = None if power_limit_w is None else METER_STEP_ROOM * power_limit_w
        bound = "" if ceiling is None else \
            f" and <= {METER_STEP_ROOM:g} x the power limit {power_limit_w:g} W (room for the counter's update steps)"
        out.append(
            _expect(
                E.ExpectColumnValuesToBeBetween(column="avg_power_w", min_value=0.0, max_value=ceiling),
                "range",
                f"avg_power_w >= 0{bound}",
            )
        )
    for col in ("invalid",) if fractional_correct else ("correct", "invalid"):
        if has(col):
            out.append(_expect(E.ExpectColumnValuesToBeInSet(column=col, value_set=[0, 1]),
                               "range", f"{col} is 0 or 1"))
    if fractional_correct and has("correct"):
        out.append(_expect(E.ExpectColumnValuesToBeBetween(column="correct", min_value=0.0, max_value=1.0),
                           "range", "correct is an expected correctness in [0, 1]"))
        if has("invalid"):
            # a user's score (label_source feedback) judges the answer itself, read by the extractor or not
            feedback = ' and label_source!="feedback"' if label_column else ""
            out.append(_expect(E.ExpectColumnValuesToBeInSet(column="correct", value_set=[0],
                                                              row_condition=f"invalid==1{feedback}",
                                                              condition_parser="pandas"),
                               "range", "an invalid answer (invalid=1) is never counted as correct"
                               + (" (unless a user's feedback scored it)" if label_column else "")))
    elif has("correct", "invalid"):
        out.append(
            _expect(
                E.ExpectColumnPairValuesToBeInSet(
                    column_A="correct", column_B="invalid", value_pairs_set=[(0, 0), (1, 0), (0, 1)]
                ),
                "range",
                "an invalid answer (invalid=1) is never counted as correct",
            )
        )
    if has("split"):
        out.append(_expect(E.ExpectColumnValuesToBeInSet(column="split", value_set=list(SPLITS)),
                           "range", f"split is one of {list(SPLITS)}"))
    if has("candidate_id"):
        out.append(
            _expect(
                E.ExpectColumnValuesToMatchRegex(column="candidate_id", regex=CANDIDATE_ID_REGEX),
                "schema",
                f"candidate_id matches {CANDIDATE_ID_REGEX}",
            )
        )
    for col in ("query_id", "energy_attribution", "model_id", "backend", "run_id", "task"):
        if has(col):
            out.append(_expect(E.ExpectColumnValueLengthsToBeBetween(column=col, min_value=1),
                               "schema", f"{col} is not empty"))

    # Energy: labelled, from a known meter, and one label per profile.
    if has("energy_source"):
        out.append(
            _expect(
                E.ExpectColumnValuesToBeInSet(column="energy_source", value_set=list(ENERGY_SOURCES)),
                "energy",
                f"energy_source is one of {list(ENERGY_SOURCES)}",
            )
        )
        if not allow_mixed_sources:
            out.append(
                _expect(
                    E.ExpectColumnUniqueValueCountToBeBetween(column="energy_source", min_value=1, max_value=1),
                    "energy",
                    "the whole profile carries a single energy_source "
                    "(set energy_policy.allow_mixed_sources to accept several)",
                )
            )

    # Completeness: unique pairs + both id sets equal + rows = |Q| x |C| together
    # mean every query met every candidate exactly once.
    if has("query_id", "candidate_id"):
        out += [
            _expect(
                E.ExpectCompoundColumnsToBeUnique(column_list=["query_id", "candidate_id"]),
                "completeness",
                "each (query_id, candidate_id) pair appears at most once",
            ),
            _expect(
                E.ExpectColumnDistinctValuesToEqualSet(column="query_id", value_set=sorted(expected_query_ids)),
                "completeness",
                f"the profile covers exactly the {len(expected_query_ids)} expected queries",
            ),
            _expect(
                E.ExpectColumnDistinctValuesToEqualSet(column="candidate_id", value_set=sorted(expected_candidate_ids)),
                "completeness",
                f"the profile covers exactly the candidates {sorted(expected_candidate_ids)}",
            ),
            _expect(
                E.ExpectTableRowCountToEqual(value=len(expected_query_ids) * len(expected_candidate_ids)),
                "completeness",
                f"rows = {len(expected_query_ids)} queries x {len(expected_candidate_ids)} candidates",
            ),
        ]
    return out


# gold, vote, feedback, or reference:<candidate> (labels/sources.py)
LABEL_SOURCE_REGEX = r"^(?:gold|vote|feedback|reference:[a-z0-9][a-z0-9._-]*)$"


def label_expectations(allow_mixed: bool) -> list:
    """A labelled profile: every row's ``correct`` is set and says where it came from, from one source unless
    ``labels.allow_mixed``."""
    out = [
        _expect(E.ExpectColumnValuesToNotBeNull(column="correct"), "labels",
                "every row of the labelled profile has a correct value (unlabelled queries are left out)"),
        _expect(E.ExpectColumnValuesToNotBeNull(column="label_source"), "labels",
                "every row's correct value says where it came from (label_source)"),
        _expect(E.ExpectColumnValuesToMatchRegex(column="label_source", regex=LABEL_SOURCE_REGEX), "labels",
                "label_source is gold, vote, feedback or reference:<candidate>"),
    ]
    if not allow_mixed:
        out.append(_expect(E.ExpectColumnUniqueValueCountToBeBetween(column="label_source", min_value=1, max_value=1),
                           "labels", "the whole profile carries a single label_source "
                                     "(set labels.allow_mixed to train on mixed labels)"))
    return out


def coverage_expectations(min_coverage: float) -> list:
    """The labels' coverage (labelled queries / profiled queries, one row) is at least ``labels.min_coverage``."""
    return [_expect(E.ExpectColumnValuesToBeBetween(column="coverage", min_value=min_coverage), "labels",
                    f"the labels mark at least labels.min_coverage = {min_coverage:g} of the profiled queries")]


def plausibility_frame(profile):
    """The generated answers (output_tokens > 0; log-likelihood rows generate none), with their J per token."""
    needed = {"query_id", "candidate_id", "energy_j", "energy_source", "output_tokens"}
    if not needed <= set(profile.columns):
        return None
    rows = profile.loc[profile["output_tokens"] > 0, sorted(needed)].copy()
    rows["j_per_output_token"] = rows["energy_j"] / rows["output_tokens"]
    return rows.reset_index(drop=True)


def plausibility_expectations(floor: float) -> list:
    """Joules per output token at least ``floor`` (params validate.min_j_per_output_token)."""
    if floor <= 0:
        return []
    return [_expect(
        E.ExpectColumnValuesToBeBetween(column="j_per_output_token", min_value=floor),
        "plausibility",
        f"energy_j / output_tokens >= validate.min_j_per_output_token = {floor:g} J per output token (1% of "
        "the smallest ML.ENERGY reference). Far less is not an answer's energy: most likely the client's own "
        "CPU time for a call to a served model (meter the GPU node: energy.exporter_url, docs/cluster.md), "
        "or a meter window that missed the work",
    )]


def cross_expectations() -> list:
    """Expectations on the profile joined to the query table (columns query_task, query_split).

    Rows whose query is not in the query table are skipped here: the completeness
    expectation on query_id already names them.
    """
    pair = dict(ignore_row_if="either_value_is_missing")
    return [
        _expect(
            E.ExpectColumnPairValuesToBeEqual(column_A="task", column_B="query_task", **pair),
            "consistency",
            "each profile row's task equals the task of its query in the query table",
        ),
        _expect(
            E.ExpectColumnPairValuesToBeEqual(column_A="split", column_B="query_split", **pair),
            "consistency",
            "each profile row's split equals the split of its query in the query table",
        ),
    ]
