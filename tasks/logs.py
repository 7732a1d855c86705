"""Stage output into Prefect's task log, line by line while the stage runs, at the line's own level."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from typing import Iterator

# `jouleroute` CLI lines: "HH:MM:SS LEVEL logger: message" (jouleroute/cli.py's format)
_CLI_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
_DVC_ERROR = re.compile(r"^(ERROR|WARNING): ")


def line_level(line: str) -> int:
    match = _CLI_LINE.match(line) or _DVC_ERROR.match(line)
    return getattr(logging, match.group(1)) if match else logging.INFO


class _Forward(logging.Handler):
    def __init__(self, target: logging.Logger | logging.LoggerAdapter) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        self.target.log(record.levelno, "%s: %s", record.name, record.getMessage())


@contextmanager
def library_logs_to(target: logging.Logger | logging.LoggerAdapter, level: int = logging.INFO) -> Iterator[None]:
    """Forward ``jouleroute.*`` log records emitted in this process (e.g. on a Dask worker) to ``target``."""
    handler = _Forward(target)
    handler.setLevel(level)
    library = logging.getLogger("jouleroute")
    previous = library.level
    library.addHandler(handler)
    if library.getEffectiveLevel() > level:
        library.setLevel(level)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(previous)
