"""The stage table: dvc.yaml is the only list of stages, and this module reads it for everyone else.

The CLI's stage commands, their order in ``--help``, the inputs a stage checks before it runs, the
stage that makes a missing input, the Prefect flows, the tests and the end-to-end benchmark all ask
here. A stage named ``x`` in any dvc.yaml (the main pipeline's or a study's) runs ``jouleroute x``,
whose code is ``x_stage(ctx)`` in ``jouleroute/stages/x.py`` (tests/test_architecture.py checks it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PATH_VAR = re.compile(r"^\$\{paths\.(\w+)\}")  # `${paths.profile}`, `${paths.evaluate_dir}/report.json`


@dataclass(frozen=True)
class Stage:
    name: str
    cmd: str
    deps: tuple[str, ...]
    outs: tuple[str, ...]  # outs, metrics and plots: whatever the stage writes
    params: tuple[str, ...]  # params keys (a study's are listed under its params file)
    mlflow: dict | None = None  # meta.mlflow: what its MLflow run logs besides params and tags ({metrics, artifacts})
    wdir: str = "."  # where it runs, from its dvc.yaml's folder: a study's stages run at the root (``../..``)


def _entries(items: list | None) -> tuple[str, ...]:
    """The paths of a dvc.yaml list, whose items are a path or ``{path: {options}}``."""
    found: list[str] = []
    for item in items or ():
        if isinstance(item, dict):
            for key, value in item.items():
                # a study lists its params as {file: [keys]}; an out as {path: {cache: false}}
                found += [str(v) for v in value] if isinstance(value, list) else [str(key)]
        else:
            found.append(str(item))
    return tuple(found)


def read(dvc_yaml: Path) -> dict[str, Stage]:
    """The stages of ``dvc_yaml``, in its order."""
    if not dvc_yaml.exists():
        raise FileNotFoundError(f"{dvc_yaml} not found: run from the repository root, or pass --root")
    stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})
    return {name: Stage(name, str(body.get("cmd", "")), _entries(body.get("deps")),
                        _entries(body.get("outs")) + _entries(body.get("metrics")) + _entries(body.get("plots")),
                        _entries(body.get("params")), (body.get("meta") or {}).get("mlflow"), body.get("wdir", "."))
            for name, body in stages.items()}


def main_dvc_yaml(root: Path | None = None) -> Path:
    """The main pipeline's dvc.yaml: under ``root``, else this checkout's (else the working directory's)."""
    for candidate in ([root] if root else []) + [REPO, Path.cwd()]:
        if (candidate / "dvc.yaml").exists():
            return candidate / "dvc.yaml"
    return (root or REPO) / "dvc.yaml"


def study_dvc_yamls(root: Path | None = None) -> list[Path]:
    return sorted(main_dvc_yaml(root).parent.glob("studies/*/dvc.yaml"))


def stage_order(dvc_yaml: Path | None = None) -> list[str]:
    """The stages of one dvc.yaml (the main pipeline's by default), in the order DVC lists them."""
    return list(read(dvc_yaml or main_dvc_yaml()))


def stage_names(root: Path | None = None) -> list[str]:
    """Every stage name of the main pipeline, then the studies' own (e.g. `replay`): the CLI's stage commands."""
    names = stage_order(main_dvc_yaml(root))
    for path in study_dvc_yamls(root):
        names += [name for name in read(path) if name not in names]
    return names


def dvc_yaml_for(params_path: Path, root: Path) -> Path:
    """The dvc.yaml beside the params file (studies/replay/...), else the repository's."""
    beside = params_path.parent / "dvc.yaml"
    return beside if beside.exists() else root / "dvc.yaml"


def target(root: Path, dvc_yaml: Path, name: str) -> str:
    """The DVC target of a stage, from ``root``: ``name`` in the root's dvc.yaml, ``path/dvc.yaml:name`` elsewhere."""
    if dvc_yaml.resolve() == (root / "dvc.yaml").resolve():
        return name
    return f"{dvc_yaml.resolve().relative_to(root.resolve()).as_posix()}:{name}"


def path_names(entries: tuple[str, ...]) -> list[str]:
    """The `paths:` names an entry list refers to (``${paths.profile}`` -> ``profile``)."""
    return [m.group(1) for m in map(PATH_VAR.match, entries) if m]


def producers(dvc_yamls: list[Path]) -> dict[str, str]:
    """`paths:` name -> the stage that writes it (``evaluate_dir`` -> ``evaluate``); the first file wins."""
    made: dict[str, str] = {}
    for path in dvc_yamls:
        for stage in read(path).values():
            for name in path_names(stage.outs):
                made.setdefault(name, stage.name)
    return made


def inputs(stage: str, dvc_yamls: list[Path]) -> list[str]:
    """What ``stage`` reads that another stage makes (its ``${paths.*}`` deps with a producer): the CLI
    checks these exist before the stage runs, so a missing one names the `dvc repro` that makes it."""
    for path in dvc_yamls:
        found = read(path)
        if stage in found:
            made = producers(dvc_yamls)
            return [name for name in path_names(found[stage].deps) if made.get(name, stage) != stage]
    return []


def _under(path: str, out: str) -> bool:
    return path == out or path.startswith(out.rstrip("/") + "/") or out.startswith(path.rstrip("/") + "/")


def rerun_by(param: str, dvc_yaml: Path | None = None) -> list[str]:
    """The stages `dvc repro` reruns when ``param`` (e.g. ``router.lam``) changes: those whose params name it
    or a section above it, then every stage downstream of one of those (a dep that is, or holds, its output)."""
    stages = read(dvc_yaml or main_dvc_yaml())
    parts = param.split(".")
    above = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    hit = [name for name, stage in stages.items() if above & set(stage.params)]
    for name, stage in stages.items():  # dvc.yaml lists a stage after what it reads
        if name not in hit and any(_under(dep, out) for r in hit for out in stages[r].outs for dep in stage.deps):
            hit.append(name)
    return [name for name in stages if name in hit]


def is_own_params(params_path: Path, root: Path) -> bool:
    """The repository's params.yaml, or a params.yaml beside its own dvc.yaml (a study's): a pipeline's own
    file, whose `paths:` are that pipeline's. Any other file is a copy (StageContext namespaces its outputs)."""
    params_path = params_path.resolve()
    if params_path == (root / "params.yaml").resolve():
        return True
    return params_path.name == "params.yaml" and (params_path.parent / "dvc.yaml").is_file()


def tracked_outputs(root: Path, extra: list[Path] = ()) -> dict[Path, str]:
    """Every `${paths.*}` output of the repository's pipelines (the main one, the studies', and ``extra`` ones such
    as a pool's beside a copied params file), resolved with each pipeline's own params file (the params.yaml
    beside it): absolute path -> 'dvc.yaml (stage x)' / 'studies/replay/dvc.yaml (stage x)'."""
    from jouleroute.config import load_params

    owners: dict[Path, str] = {}
    main = main_dvc_yaml(root)
    for dvc_yaml in dict.fromkeys([main, *study_dvc_yamls(root), *extra]):
        params_file = root / "params.yaml" if dvc_yaml == main else dvc_yaml.parent / "params.yaml"
        if not dvc_yaml.is_file() or not params_file.is_file():
            continue
        paths = load_params(params_file).paths
        shown = dvc_yaml.relative_to(root) if dvc_yaml.is_relative_to(root) else dvc_yaml
        for stage in read(dvc_yaml).values():
            for entry in stage.outs:
                match = PATH_VAR.match(entry)
                if match and match.group(1) in type(paths).model_fields:
                    path = (root / (getattr(paths, match.group(1)) + entry[match.end():])).resolve()
                elif "${" not in entry:  # a literal out, relative to where the stage runs
                    path = (dvc_yaml.parent / stage.wdir / entry).resolve()
                else:
                    continue
                owners.setdefault(path, f"{shown} (stage {stage.name})")
    return owners
