"""Expected failures as one line with the fix; anything else keeps its traceback (so does ``--debug``)."""

from __future__ import annotations

import os
import re
from pathlib import Path


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _dataset_of(found: str, ctx) -> str | None:
    """The manifest dataset a missing file belongs to, when it lies in the data root."""
    if ctx is None:
        return None
    from jouleroute.datastore.manifest import ManifestError, load_manifest

    root = ctx.path("data_root")
    if not Path(found).resolve().is_relative_to(root):
        return None
    try:
        return load_manifest(ctx.path("data_manifest")).owner_of(Path(found), root)
    except ManifestError:
        return None
def _fetch_hint(message: str, ctx) -> str | None:
    """How to fetch a data-root file the message names as missing: the whole root (`make setup`) when it is
    absent or empty, else the dataset that holds the file."""
    found = message.split(": ", 1)[0]
    if ctx is None or ": missing" not in message or Path(found).exists():
        return None
    root = ctx.path("data_root")
    shown = os.path.relpath(root) if root.is_absolute() else str(root)
    if not root.is_dir() or not any(root.iterdir()):
        return (f" (the data root {shown} is {'empty' if root.is_dir() else 'missing'}: run `make setup`, which "
                "fills it from ../shared/data or the original sources, or `jouleroute data fetch --from DIR` on a "
                "copy; docs/data.md)")
    dataset = _dataset_of(str(Path(found).resolve()), ctx)
    return f": run `jouleroute data fetch {dataset}` (docs/data.md)" if dataset else None


def _message(exc: BaseException) -> str:
    """The error's own text: a KeyError's str() wraps it in quotes, so its argument is taken as it is; any
    other message is kept whole (stripping quotes lost the closing one of ``got '2'``)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _missing_file(exc: FileNotFoundError, ctx) -> str:
    found = exc.filename or next(iter(re.findall(r"(/[^\s'\"]+)", str(exc))), None)
    if found is None:
        return _one_line(str(exc))
    shown = os.path.relpath(found) if Path(found).is_absolute() else found
    dataset = _dataset_of(found, ctx)
    if dataset is not None:
        return f"missing input {shown}: the dataset {dataset} is not in the data root: run `jouleroute data " \
               f"fetch {dataset}` (docs/data.md)"
    stage = ctx.producer_of(found) if ctx is not None else None
    fix = f": run `{ctx.repro_hint(stage)}` first" if stage else ""
    return f"missing input {shown}{fix}"


def expected_error(exc: BaseException, ctx) -> str | None:
    """The message to print for an expected failure, or ``None`` for a bug (traceback wanted)."""
    from jouleroute.backends.openai_backend import BackendRequestError
    from jouleroute.benchmarks.reading import BenchmarkDataError
    from jouleroute.benchmarks.registry import UnknownTaskError
    from jouleroute.config import ParamsError
    from jouleroute.datastore.manifest import ManifestError
    from jouleroute.energy.zeus_meter import MeterUnavailableError
    from jouleroute.evaluation.frontier import OracleSanityError
    from jouleroute.evaluation.run import MixedEnergySourcesError
    from jouleroute.replay.energy_model import EnergyReferenceError
    from jouleroute.replay.outcome_table import OutcomeTableError
    from jouleroute.stages import StageFailed
    from jouleroute.tracking import TrackingStoreError

    if isinstance(exc, (ParamsError, StageFailed)):
        return str(exc)  # already written for people: one line per problem
    if isinstance(exc, FileNotFoundError):
        return _missing_file(exc, ctx)
    if isinstance(exc, MeterUnavailableError):
        return "no energy meter: " + _one_line(str(exc))
    if isinstance(exc, MixedEnergySourcesError):
        return _one_line(str(exc))
    if isinstance(exc, BackendRequestError):  # an unreachable server, a missing API key, a refused request
        return "model server: " + _one_line(str(exc))
    if isinstance(exc, (BenchmarkDataError, OutcomeTableError, EnergyReferenceError, ManifestError, UnknownTaskError,
                        OracleSanityError, TrackingStoreError)):
        return "data error: " + _one_line(_message(exc)) + (_fetch_hint(_message(exc), ctx) or "")
    return None
