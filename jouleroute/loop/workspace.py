"""A loop's workspace: one folder holding the loop's config, its pipeline, its traffic, what it serves and its report.

``<folder>/`` (e.g. ``loops/mine``, every path relative to the repository root, where the stages run):

- ``loop.yaml``: the loop's own settings (``LoopConfig``: the capture folder it folds, the gate's margin);
- ``params.yaml`` + ``dvc.yaml``: the loop's pipeline, the main pipeline's stages from prepare to evaluate on the
  folded prompts (``prepare.source: prompts``) with their labels (``labels``), outputs under ``artifacts/``
  (written by ``init.py``); ``jouleroute --params <folder>/params.yaml repro`` runs it;
- ``data/prompts.jsonl``, ``data/feedback.csv``: the traffic folded so far (fold.py), DVC-tracked per iteration;
- ``state.json``: how far each capture segment was folded;
- ``serving/champion`` -> ``serving/versions/<v>/champion``: what the gateway serves (``serve.yaml``), swapped
  atomically on promotion (serving.py), earlier versions kept for rollback;
- ``report.md``, ``report.jsonl``: one line per iteration (report.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from jouleroute.strict import STRICT_CONTEXT, StrictModel, UniqueKeyLoader, yaml_only_value


class LoopError(ValueError):
    """A loop that cannot run as configured; the message names the file and what to do."""


class LoopConfig(StrictModel):
    """``loop.yaml``: what the loop folds and how strict its gate is (jouleroute/loop/gate.py)."""

    capture: str = Field(min_length=1)  # the gateway's gateway.capture.folder, relative to the repository root
    margin: float | None = Field(default=None, ge=0.0, le=1.0)  # null: the params' evaluate.noninferiority_margin
    samples: int = Field(default=1000, ge=0)  # bootstrap resamples of the newest test queries
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    seed: int = 0
    keep_versions: int = Field(default=5, ge=2)  # served versions kept for rollback (the serving one included)


@dataclass(frozen=True)
class Workspace:
    """The files of a loop (module doc); ``root`` is the repository root, ``folder`` the workspace, under it."""

    root: Path
    folder: Path

    @classmethod
    def of(cls, params_path: str | Path, root: str | Path) -> "Workspace":
        """The workspace whose pipeline ``params_path`` is (the loop's params.yaml names its folder)."""
        root = Path(root).resolve()
        params = Path(params_path) if Path(params_path).is_absolute() else root / params_path
        return cls(root, params.resolve().parent)

    @property
    def rel(self) -> str:
        """The folder, relative to the root (how params.yaml and dvc.yaml name it)."""
        return self.folder.relative_to(self.root).as_posix()

    @property
    def name(self) -> str:
        return self.folder.name

    config_file = property(lambda self: self.folder / "loop.yaml")
    params_file = property(lambda self: self.folder / "params.yaml")
    dvc_file = property(lambda self: self.folder / "dvc.yaml")
    serve_params = property(lambda self: self.folder / "serve.yaml")
    prompts = property(lambda self: self.folder / "data" / "prompts.jsonl")
    feedback = property(lambda self: self.folder / "data" / "feedback.csv")
    state = property(lambda self: self.folder / "state.json")
    serving = property(lambda self: self.folder / "serving")
    report_md = property(lambda self: self.folder / "report.md")
    report_jsonl = property(lambda self: self.folder / "report.jsonl")

    def config(self) -> LoopConfig:
        if not self.config_file.is_file():
            raise LoopError(f"{self.config_file}: no loop here; create one with `jouleroute-flow --params "
                            f"{self.rel}/params.yaml loop --init --capture <the gateway's capture folder>` "
                            "(docs/loop.md)")
        try:
            raw = yaml.load(self.config_file.read_text(), Loader=UniqueKeyLoader) or {}
            unquoted = yaml_only_value(raw)  # a date turned into text would pass a text field
            if unquoted:
                raise LoopError(f"{self.config_file}: {unquoted}")
            return LoopConfig.model_validate_json(json.dumps(raw), strict=True, context=STRICT_CONTEXT)
        except (yaml.YAMLError, ValidationError) as error:
            first = str(error).splitlines()
            raise LoopError(f"{self.config_file}: {' '.join(first[:3])}") from None

    def capture_folder(self) -> Path:
        folder = Path(self.config().capture)
        return folder if folder.is_absolute() else self.root / folder

    def show(self, path: Path) -> str:
        """``path`` relative to the root when it lies under it (what the report and MLflow record)."""
        path = Path(path)
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)


def jsonl_records(path: Path) -> list[dict]:
    """The objects of a JSONL file the loop writes (none when it is not there yet). Lines end at "\n" only:
    str.splitlines would also cut at U+2028, U+2029 or U+0085, which JSON keeps raw inside a prompt."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
