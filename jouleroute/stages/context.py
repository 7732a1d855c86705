"""What every stage function receives: typed params, the repo root, tracking and progress."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Callable

import yaml

from jouleroute.atomic import atomic_write_text
from jouleroute.config import Params, ParamsError, load_params
from jouleroute.paths import relative_to
from jouleroute.provenance import git_sha, stable_hash
from jouleroute.stages import StageFailed, table
from jouleroute.tracking import flat_params, stage_run
from jouleroute.tracking import tracking_uri as store_uri

logger = logging.getLogger(__name__)

ProgressFactory = Callable[[int, str], Callable[[int], None]]

class MissingInput(StageFailed):
    """A stage's input does not exist yet; the message names the `dvc repro` that makes it."""


def _no_progress(total: int, label: str) -> Callable[[int], None]:
    return lambda n: None


@dataclass
class StageContext:
    params: Params
    root: Path
    params_path: Path
    progress: ProgressFactory = field(default=_no_progress)
    # when the stage began: its MLflow run starts here, so the run's duration is the stage's wall time
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # a params file that is no pipeline's own (a copy of params.yaml): its outputs' namespace (jouleroute/paths.py)
    namespace: str | None = None

    @classmethod
    def load(cls, params_path: str | Path = "params.yaml", root: str | Path | None = None,
             progress: ProgressFactory | None = None) -> "StageContext":
        params_path = Path(params_path).resolve()
        root_path = Path(root).resolve() if root else Path.cwd().resolve()
        params, namespace = load_params(params_path), None
        if not table.is_own_params(params_path, root_path):
            params, namespace = _as_copy(params, params_path, root_path)
        return cls(params, root_path, params_path, progress or _no_progress, namespace=namespace)

    def path(self, name: str) -> Path:
        return self.params.paths.resolve(name, self.root)

    @property
    def tracking_uri(self) -> str | None:
        if not self.params.tracking.enabled:
            return None
        return store_uri(self.path("mlflow_db"))

    @property
    def params_hash(self) -> str:
        return stable_hash(yaml.safe_load(self.params_path.read_text()))

    def tags(self, stage: str) -> dict[str, str]:
        return {"stage": stage, "git_sha": git_sha(self.root), "params_hash": self.params_hash,
                "params_file": str(self.params_path.name), "profile_source": self.params.profile_source}

    def stage_run(self, stage: str, energy_source: str | None = None):
        """The stage's one MLflow run (``None`` inside when tracking is off), started when the stage began, with
        the params the stage depends on in dvc.yaml (``logged_params``). The stage hands it to the code that logs."""
        return stage_run(self.tracking_uri, self.params.tracking.experiment, stage, self.tags(stage),
                         self.logged_params(stage), energy_source, start_time_ms=self.started_ms)

    def logged_params(self, stage: str) -> dict[str, str]:
        """The params keys of ``stage`` in its dvc.yaml (a section, or a dotted key such as
        ``grpo.reward_source``), flattened: what MLflow logs is what DVC reruns the stage for."""
        dump = self.params.model_dump(mode="json", by_alias=True)
        keys = next((found[stage].params for path in self.dvc_yamls if path.exists()
                     and stage in (found := table.read(path))), (stage,))
        params: dict[str, str] = {}
        for key in keys:
            value = dump
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is not None:
                params.update(flat_params(key, value))
        return params

    @property
    def dvc_yamls(self) -> list[Path]:
        """The pipeline this params file drives (a study's dvc.yaml beside it), then the main one (whose
        `models` stage a study reuses)."""
        main = table.main_dvc_yaml(self.root)  # the root's, else this checkout's
        beside = self.params_path.parent / "dvc.yaml"
        return ([beside] if beside.exists() and beside.resolve() != main.resolve() else []) + [main]

    def require_inputs(self, stage: str) -> None:
        """The stage's inputs made by other stages (its dvc.yaml deps) exist and can be read, and a stage after
        `validate` builds on a validated profile (stages/inputs.py), or one line names the fix. A stage module's
        ``OPTIONAL_INPUTS`` names those it can do without."""
        optional = getattr(import_module(f"jouleroute.stages.{stage}"), "OPTIONAL_INPUTS", ())
        for name in table.inputs(stage, [p for p in self.dvc_yamls if p.exists()]):
            if name in optional:
                continue
            if not self.path(name).exists():
                producer = self.producer_of(self.path(name))
                shown = self.path(name).relative_to(self.root) if self.path(name).is_relative_to(self.root) \
                    else self.path(name)
                raise MissingInput(f"missing input {shown}: run `{self.repro_hint(producer)}` first")
        from jouleroute.stages.inputs import check_inputs

        check_inputs(self, stage, [n for n in table.inputs(stage, [p for p in self.dvc_yamls if p.exists()])
                                   if self.path(n).exists()])

    def check_outputs(self, stage: str) -> None:
        """A copy's stage never writes what a pipeline's dvc.yaml tracks (its own params file's outputs); one line
        names the output, its owner and the key to set. Nothing to check for a pipeline's own params file."""
        if self.namespace is None:
            return
        found = [p for p in [*self.dvc_yamls, *table.study_dvc_yamls(self.root)] if p.exists() and stage in table.read(p)]
        if not found:
            return
        mine = {name: self.path(name) for name in table.path_names(table.read(found[0])[stage].outs)}
        for tracked, owner in table.tracked_outputs(self.root, [p for p in self.dvc_yamls if p.exists()]).items():
            for name, out in mine.items():
                if out == tracked or out.is_relative_to(tracked) or tracked.is_relative_to(out):
                    shown = tracked.relative_to(self.root) if tracked.is_relative_to(self.root) else tracked
                    raise StageFailed(f"{self.params_path.name}: `{stage}` would write {shown}, an output of {owner}; "
                                      f"a params copy writes only its own outputs: set paths.{name} in "
                                      f"{self.params_path.name} (e.g. artifacts/{self.namespace}/...)")

    def repro_hint(self, stage: str) -> str:
        """What makes ``stage``'s outputs: `dvc repro <stage>`, `dvc repro studies/x/dvc.yaml:<stage>` for a study's
        own stage; for a params copy, whose own outputs no dvc.yaml tracks (`repro` refuses it), the stage itself."""
        if self.namespace is not None:
            try:
                self.check_outputs(stage)
                return f"jouleroute --params {relative_to(self.params_path, self.root)} {stage}"
            except StageFailed:
                pass  # what the copy reads there is a pipeline's output: that pipeline makes it
        for path in self.dvc_yamls[:-1]:  # a study's own stage; else the main pipeline's
            if stage in table.read(path) and path.resolve().is_relative_to(self.root.resolve()):
                return f"dvc repro {table.target(self.root, path, stage)}"
        return f"dvc repro {stage}"

    def producer_of(self, missing: str | Path) -> str | None:
        """The stage whose output ``missing`` is (or lies under): what to `dvc repro` when it is absent."""
        missing = Path(missing).resolve()
        for name, stage in table.producers([p for p in self.dvc_yamls if p.exists()]).items():
            if name not in type(self.params.paths).model_fields:
                continue
            out = self.path(name)
            if missing == out or missing.is_relative_to(out):
                return stage
        return None

    def section_hash(self, *sections: str) -> str:
        dump = self.params.model_dump(mode="json", by_alias=True)
        return stable_hash({s: dump.get(s) for s in sections})


def _as_copy(params: Params, params_path: Path, root: Path) -> tuple[Params, str]:
    """A params file that is no pipeline's own: its outputs that are still the main pipeline's go under a namespace
    of its name (artifacts/<name>/, mlruns/<name>/), so the copy cannot overwrite what dvc.yaml tracks."""
    from jouleroute.paths import PathsConfig, namespace_of, namespaced

    main_file = root / "params.yaml"
    main = load_params(main_file).paths if main_file.is_file() else PathsConfig()
    name = namespace_of(params_path)
    taken = [d for d in (root / "studies" / name, root / name) if (d / "dvc.yaml").is_file()]
    if taken:  # artifacts/<name>/ and mlruns/<name>/ are that pipeline's: its MLflow store would get the copy's runs
        raise ParamsError(f"{params_path.name}: a params copy writes under artifacts/{name}/ and mlruns/{name}/, the "
                          f"namespace of the pipeline in {taken[0].relative_to(root)}/: rename the copy")
    paths, moved = namespaced(params.paths, main, name)
    if moved:
        logger.info("%s is a params copy: its outputs go under artifacts/%s/ and mlruns/%s/, never over what a "
                    "dvc.yaml tracks (%d paths moved; set them in paths: to choose)", params_path.name, name, name,
                    len(moved))
    return params.model_copy(update={"paths": paths}), name


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
