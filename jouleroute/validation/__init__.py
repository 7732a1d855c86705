"""Stage `validate`'s library: a profile checked with Great Expectations before anything learns from it.

``run.py`` runs the suites and writes the reports, ``suite.py`` holds the expectations, ``report.py``
turns failures into the readable summary and the offline HTML page.
"""

from jouleroute.validation.config import ValidateConfig
from jouleroute.validation.run import ValidationError, ValidationResult, run_validate

__all__ = ["ValidateConfig", "ValidationError", "ValidationResult", "run_validate"]
