"""Evaluation of routers: metrics, oracle, AIQ/PGR, lambda sweeps, phase transitions, plots, report.

Entry point: ``run_evaluate``. Metric definitions: docs/metrics.md.
"""

from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.frontier import OracleSanityError
from jouleroute.evaluation.outcomes import RouterRun, oracle_choices
from jouleroute.evaluation.run import EvaluationResult, MixedEnergySourcesError, run_evaluate

__all__ = [
    "EvaluateConfig",
    "EvaluationResult",
    "MixedEnergySourcesError",
    "OracleSanityError",
    "RouterRun",
    "oracle_choices",
    "run_evaluate",
]
