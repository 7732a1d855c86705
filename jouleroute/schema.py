"""Column contracts shared by every stage.

Units live in the column names (``_s``, ``_j``, ``_w``). Later stages (router
training, evaluation, replay) read only these columns, so a profile produced by
the live tournament and one imported from public outcome data are
interchangeable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa

# Every energy number carries one of these labels.
ENERGY_SOURCES = ("measured-nvml", "measured-rapl", "estimated", "modelled")

SPLITS = ("train", "val", "test")

# --- query table (stage `prepare`) -------------------------------------------
QUERY_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),  # stable: "<task>/<source-id>"
        pa.field("task", pa.string(), nullable=False),  # gsm8k, math500, mmlu, ...
        pa.field("subtask", pa.string(), nullable=False),  # BBH sub-task / MMLU subject / "" otherwise
        pa.field("split", pa.string(), nullable=False),  # train | val | test
        pa.field("question", pa.string(), nullable=False),  # problem text, options rendered in
        pa.field("choices_json", pa.string(), nullable=False),  # JSON list of option texts ("[]" if open)
        pa.field("gold", pa.string(), nullable=True),  # gold answer (letter, number, string, LaTeX); null: ungraded
        pa.field("source_file", pa.string(), nullable=False),  # repo-relative path it was read from
        pa.field("source_row", pa.int64(), nullable=False),  # 0-based row (or example index) in that file
    ]
)

# --- profile table (stage `tournament`, or the replay importer) ---------------
# One row per (query_id, candidate_id). A pair whose query has no gold (a user's own prompt) is ungraded:
# ``correct`` null, while ``invalid`` and ``extracted_answer`` still say what answer could be read.
PROFILE_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("correct", pa.int8(), nullable=True),  # 1 right, 0 wrong (invalid counts as wrong), null: no gold
        pa.field("invalid", pa.int8(), nullable=False),  # 1 when no answer could be extracted
        pa.field("extracted_answer", pa.string(), nullable=True),
        pa.field("output_text", pa.string(), nullable=True),
        pa.field("input_tokens", pa.int64(), nullable=False),
        pa.field("output_tokens", pa.int64(), nullable=False),
        pa.field("batch_size", pa.int64(), nullable=False),
        pa.field("latency_s", pa.float64(), nullable=False),  # request latency (batch window for in-process)
        pa.field("ttft_s", pa.float64(), nullable=True),  # time to first token, where the backend gives it
        pa.field("energy_j", pa.float64(), nullable=False),  # raw energy attributed to this row
        pa.field("energy_net_j", pa.float64(), nullable=False),  # energy_j minus idle_power_w x attributed time
        pa.field("idle_power_w", pa.float64(), nullable=False),  # idle power measured once per run
        pa.field("avg_power_w", pa.float64(), nullable=False),  # window energy / window time
        pa.field("energy_source", pa.string(), nullable=False),  # one of ENERGY_SOURCES
        pa.field("energy_attribution", pa.string(), nullable=False),  # rule used to split a batch window
        pa.field("window_s", pa.float64(), nullable=False),  # length of the measurement window
        pa.field("model_id", pa.string(), nullable=False),
        pa.field("backend", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),  # tournament run that produced the row
    ]
)

PROFILE_COLUMNS = tuple(PROFILE_SCHEMA.names)

# An imported profile may carry an *expected* correctness in [0, 1] (e.g. pass@1 averaged over samples):
# the same columns with ``correct`` as float64. Every reader treats ``correct`` as an expectation (accuracy
# is its mean, utilities and rewards use it as is); a live tournament always writes 0/1 (int8).
FRACTIONAL_PROFILE_SCHEMA = PROFILE_SCHEMA.set(
    PROFILE_SCHEMA.get_field_index("correct"), pa.field("correct", pa.float64(), nullable=True))


def profile_schema(correct) -> pa.Schema:
    """PROFILE_SCHEMA when every graded ``correct`` value is 0 or 1 (int8, as before), else
    FRACTIONAL_PROFILE_SCHEMA; null values (ungraded pairs: None or NaN) fit either."""
    values = [float(v) for v in correct if v is not None]
    return PROFILE_SCHEMA if all(v in (0.0, 1.0) or math.isnan(v) for v in values) else FRACTIONAL_PROFILE_SCHEMA


QUERY_COLUMNS = tuple(QUERY_SCHEMA.names)


@dataclass(frozen=True)
class PairOutcome:
    """One (query, candidate) pair as a GRPO reward reads it: its correctness and its joules (the energy
    column of params ``energy_policy``), replayed from a table or run live by the tournament. (A router's
    outcome over a whole split is ``evaluation.outcomes.Outcome``.)"""

    correct: float
    energy_j: float
