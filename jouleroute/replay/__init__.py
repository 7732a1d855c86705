"""Replay profiles from public outcome data: real correctness, modelled energy (docs/replay.md).

``run_replay`` turns RouterBench's per-query outcomes into the project's query table and
profile; ``run_import`` does the same for a user's own outcome table. Both write the
tournament's PROFILE_SCHEMA with energy_source "modelled" (or the table's own measured
source), plus a ``<profile>.provenance.parquet`` sidecar naming each row's origin.
"""

from jouleroute.replay.config import EnergyMapping, EnergyModelConfig, ImportConfig, ReplayConfig, ReplayModel
from jouleroute.replay.importer import run_import
from jouleroute.replay.outcome_table import OutcomeTableError
from jouleroute.replay.stage import run_replay
from jouleroute.replay.tables import PROVENANCE_SCHEMA, provenance_path

__all__ = [
    "EnergyMapping",
    "EnergyModelConfig",
    "ImportConfig",
    "OutcomeTableError",
    "PROVENANCE_SCHEMA",
    "ReplayConfig",
    "ReplayModel",
    "provenance_path",
    "run_import",
    "run_replay",
]
