"""How the reports print a number: one rule for report.md and the generated pages."""

from __future__ import annotations


def fmt(x, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals (significant digits when very large or small); "n/a" for None."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if abs(x) < 0.5 * 10 ** -digits:
        x = 0.0  # no "-0.0" for a tiny negative
    return f"{x:.{digits}g}" if abs(x) >= 1000 or (0 < abs(x) < 0.001) else f"{x:.{digits}f}"
