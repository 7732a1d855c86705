"""What every stage function receives: typed params, the repo root, tracking and progress."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from jouleroute.config import Params, load_params
from jouleroute.provenance import git_sha, stable_hash

logger = logging.getLogger(__name__)

ProgressFactory = Callable[[int, str], Callable[[int], None]]


def _no_progress(total: int, label: str) -> Callable[[int], None]:
    return lambda n: None


@dataclass
class StageContext:
    params: Params
    root: Path
    params_path: Path
    progress: ProgressFactory = field(default=_no_progress)

    @classmethod
    def load(cls, params_path: str | Path = "params.yaml", root: str | Path | None = None,
             progress: ProgressFactory | None = None) -> "StageContext":
        params_path = Path(params_path).resolve()
        root_path = Path(root).resolve() if root else Path.cwd().resolve()
        return cls(load_params(params_path), root_path, params_path, progress or _no_progress)

    def path(self, name: str) -> Path:
        return self.params.paths.resolve(name, self.root)

    @property
    def tracking_uri(self) -> str | None:
        if not self.params.tracking.enabled:
            return None
        return f"sqlite:///{self.path('mlflow_db')}"

    @property
    def params_hash(self) -> str:
        return stable_hash(yaml.safe_load(self.params_path.read_text()))

    def tags(self, stage: str) -> dict[str, str]:
        return {"stage": stage, "git_sha": git_sha(self.root), "params_hash": self.params_hash,
                "params_file": str(self.params_path.name), "profile_source": self.params.profile_source}

    def section_hash(self, *sections: str) -> str:
        dump = self.params.model_dump(mode="json", by_alias=True)
        return stable_hash({s: dump.get(s) for s in sections})


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
