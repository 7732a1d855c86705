"""One pipeline run per repository at a time, whoever starts it (a schedule, `jouleroute-flow run`).

The deployment's concurrency limit already queues runs of one deployment; this
lock also covers an ad-hoc run next to a scheduled one. It is an ``flock`` on a
file in ``.dvc/tmp``, released by the kernel if the holder dies, so a killed run
never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def pipeline_lock(root: Path, logger, poll_s: float = 1.0) -> Iterator[None]:
    path = root / ".dvc" / "tmp" / "jouleroute-pipeline.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited:
                    handle.seek(0)
                    logger.warning("another pipeline run holds %s (%s); waiting for it to finish",
                                   path, handle.read().strip() or "unknown holder")
                    waited = True
                time.sleep(poll_s)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
