"""Fill the data root: each dataset from the first source that has every one of its files, checksums checked.

A file already in the root with the right checksum is never fetched again; a file whose kept bytes do not
match the manifest is refused and not written; a dataset no source can complete is reported, never half-kept
as if it were complete (the files that did match stay: they are right, and a later fetch skips them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from jouleroute.atomic import atomic_write_bytes
from jouleroute.datastore.manifest import Dataset, Manifest
from jouleroute.datastore.sources import Source, sha256, subset

log = logging.getLogger(__name__)


@dataclass
class FillResult:
    name: str
    status: str  # "present" (nothing to do) | "filled" | "missing"
    source: str | None = None  # the source that completed it
    fetched: int = 0  # files written this time
    refused: list[str] = field(default_factory=list)  # "<file> from <source>: checksum mismatch"
    missing_files: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)


def file_ok(root: Path, name: str, path: str, sha: str, size: int) -> bool:
    file = root / name / path
    return file.is_file() and file.stat().st_size == size and sha256(file.read_bytes()) == sha


def missing_files(root: Path, name: str, dataset: Dataset) -> list[str]:
    return [p for p, e in dataset.files.items() if not file_ok(root, name, p, e.sha256, e.bytes)]


def fill_dataset(root: Path, name: str, dataset: Dataset, sources: Sequence[Source]) -> FillResult:
    result = FillResult(name, "present")
    todo = missing_files(root, name, dataset)
    if not todo:
        return result
    for source in sources:
        result.tried.append(source.label)
        for path in list(todo):
            entry = dataset.files[path]
            blob = source.get(name, dataset, path, entry)
            if blob is None:
                continue
            kept = subset(blob, entry.keep)
            if sha256(kept) != entry.sha256 or len(kept) != entry.bytes:
                result.refused.append(f"{name}/{path} from {source.label}: checksum mismatch")
                log.warning("data: %s/%s from %s does not match the manifest's checksum: not kept",
                            name, path, source.label)
                continue
            atomic_write_bytes(root / name / path, kept)
            result.fetched += 1
            todo.remove(path)
        if not todo:
            result.status, result.source = "filled", source.label
            _write_source_note(root, name, dataset, source)
            return result
    result.status, result.missing_files = "missing", todo
    return result


def _write_source_note(root: Path, name: str, dataset: Dataset, source: Source) -> None:
    note = source.source_note(name, dataset)
    # no date and no machine-specific path: DVC ignores SOURCE.txt in the root anyway (.dvcignore), so the
    # datasets' hashes are the same wherever and whenever they were filled
    stamp = f"\nFilled into the jouleroute data root from {source.label}; checksums: the project's data manifest.\n"
    text = (note.decode() if note else f"{dataset.note or dataset.origin}\nLicence: {dataset.licence}\n")
    atomic_write_bytes(root / name / "SOURCE.txt", (text.rstrip("\n") + "\n" + stamp).encode())


def fill(root: Path, manifest: Manifest, names: list[str] | None, sources: Sequence[Source],
         progress: Callable[[int], None] | None = None) -> list[FillResult]:
    results = []
    for name, dataset in manifest.select(names).items():
        results.append(fill_dataset(Path(root), name, dataset, sources))
        if progress is not None:
            progress(1)
    return results


def status(root: Path, manifest: Manifest, names: list[str] | None = None) -> dict[str, list[str]]:
    """``{dataset: files missing or wrong}`` for the named datasets (all when empty); [] = complete."""
    return {n: missing_files(Path(root), n, d) for n, d in manifest.select(names).items()}
