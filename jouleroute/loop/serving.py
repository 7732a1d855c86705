"""What the loop serves: versions of the deployed policy, one folder each, and an atomic swap between them.

``serving/champion`` is a symbolic link to ``serving/versions/<v>/champion``: the folder a gateway started with
``serve.yaml`` serves (its ``paths.evaluate_dir`` is ``serving``). A version folder holds

- ``champion/``: the evaluate stage's champion folder as it was deployed (champion.json and the fitted parts),
  champion.json's ``model_dir`` pointing at the version's own copy of an LM router's checkpoint (``model/``), so
  a later iteration retraining in place never changes what is served; ``champion.json`` also carries
  ``trained_on``, the data version it learned from;
- ``champion/queries.parquet``, ``champion/profile.parquet``: the queries and profile it was trained on, which the
  gateway reads through ``serve.yaml`` (drift against its training queries, expected energy per candidate);
- ``version.json``: the version's provenance (data version, git sha, the decision that promoted it).

**Promotion** writes the new version beside the others, then replaces the link in one ``os.replace``: a gateway
watching ``serving/champion/champion.json`` (``gateway.reload_poll_s``) or sent SIGHUP reloads, requests in flight
finish on the old version, and the old version stays on disk (``rollback`` swaps back). A refused candidate
leaves the link untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from jouleroute.atomic import atomic_write_text
from jouleroute.gateway.version import record_version
from jouleroute.loop.workspace import jsonl_records

LINK = "champion"
RECORD = "champion.json"


def versions_dir(serving: Path) -> Path:
    return serving / "versions"


def serving_folder(serving: Path) -> Path | None:
    """The champion folder served now (the link's target), or ``None`` when nothing is served yet."""
    link = serving / LINK
    return link.resolve() if (link / RECORD).is_file() else None


def policy_version(champion: Path) -> str:
    """The version a gateway reports for a champion folder (``X-Jouleroute-Policy-Version``): gateway/version.py's
    ``record_version`` of its champion.json, the same before and after promotion stamps ``trained_on``."""
    return record_version((champion / RECORD).read_bytes())


def write_version(serving: Path, root: Path, champion: Path, queries: Path, profile: Path, provenance: dict) -> Path:
    """A new version folder from ``champion`` (an evaluate output) and the data it learned from; returns its
    champion folder. Nothing served changes."""
    record = json.loads((champion / RECORD).read_text())
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    # one past the highest number kept (pruning removes old versions: a count would reuse a number)
    numbers = [int(p.name[1:5]) for p in versions_dir(serving).glob("v[0-9][0-9][0-9][0-9]-*")] \
        if versions_dir(serving).exists() else []
    name = f"v{max(numbers, default=0) + 1:04d}-{stamp}"
    final = versions_dir(serving) / name
    tmp = versions_dir(serving) / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(champion, tmp / LINK, symlinks=False)
    if record.get("model_dir"):  # an LM router: its checkpoint, copied (a DVC output the next iteration rewrites)
        source = Path(record["model_dir"])
        source = source if source.is_absolute() else root / source
        shutil.copytree(source, tmp / "model")
        record["model_dir"] = _rel(final / "model", root)
    for src, dst in ((queries, "queries.parquet"), (profile, "profile.parquet")):
        if src.is_file():
            shutil.copy2(src, tmp / LINK / dst)
    record["trained_on"] = provenance.get("data")
    atomic_write_text(tmp / LINK / RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
    info = {**provenance, "version": name, "policy_version": policy_version(tmp / LINK)}
    atomic_write_text(tmp / "version.json", json.dumps(info, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, final)
    return final / LINK


def swap(serving: Path, champion: Path) -> Path | None:
    """Serve ``champion`` (a version's champion folder): the link replaced in one rename. Returns the folder served
    before (``None``: nothing was)."""
    before = serving_folder(serving)
    link = serving / LINK
    if link.exists() and not link.is_symlink():
        raise RuntimeError(f"{link} is a folder, not the loop's link: move it away (the loop serves versions "
                           "through a symbolic link)")
    new = serving / f".{LINK}.{os.getpid()}.new"
    new.unlink(missing_ok=True)
    os.symlink(os.path.relpath(champion, serving), new)
    os.replace(new, link)
    return before


def rollback(serving: Path) -> Path:
    """Serve the version promoted before the one served now (kept on disk for this); returns it."""
    history = read_history(serving)
    current = serving_folder(serving)
    for entry in reversed(history):
        if current is not None and Path(entry["champion"]) == current and entry.get("previous"):
            target = Path(entry["previous"])
            if (target / RECORD).is_file():
                swap(serving, target)
                append_history(serving, {"champion": str(target), "previous": str(current), "why": "rollback"})
                return target
    raise RuntimeError(f"{serving}: no earlier version to roll back to (serving/history.jsonl names none before "
                       f"{current})")


def read_history(serving: Path) -> list[dict]:
    return jsonl_records(serving / "history.jsonl")


def append_history(serving: Path, entry: dict) -> None:
    lines = read_history(serving) + [{**entry, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]
    atomic_write_text(serving / "history.jsonl", "".join(json.dumps(e, sort_keys=True) + "\n" for e in lines))


def prune(serving: Path, keep: int) -> list[Path]:
    """Remove the oldest versions beyond ``keep``, never the one served nor the one before it."""
    current = serving_folder(serving)
    history = read_history(serving)
    protected = {current.parent if current else None}
    if history and history[-1].get("previous"):
        protected.add(Path(history[-1]["previous"]).parent)
    versions = sorted(p for p in versions_dir(serving).glob("v*") if p.is_dir())
    removed = []
    for path in versions[:max(0, len(versions) - keep)]:
        if path.resolve() not in {p.resolve() for p in protected if p}:
            shutil.rmtree(path)
            removed.append(path)
    return removed


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
