"""The layers of jouleroute, and the stage table: read from the source, never run (instant).

A module may import its own package and any lower layer, never a higher one nor a peer package of
its own layer; no import circle between modules. Imports under ``if TYPE_CHECKING:`` count too: a
type hint that points upward is a dependency all the same. docs/architecture.md draws the same table.
"""

from __future__ import annotations

import ast
import os
import functools
from pathlib import Path

import pytest

from jouleroute.stages import table

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "jouleroute"

# Lowest first. A unit is a top-level module or package of jouleroute/.
LAYERS: list[set[str]] = [
    {"strict"},  # the strict base model every config class derives from
    {"atomic", "best_single", "schema", "paths", "pool", "provenance", "offline", "sampling", "stats", "torch_env"},  # shared contracts and small helpers
    {"energy", "models", "tracking", "datastore"},  # meters; the GGUF conversion; the MLflow store; the data root
    {"routing"},  # routers: score queries, decide at λ (knows no backend)
    {"backends"},  # how a model is asked
    {"benchmarks"},  # the benchmark tasks: loaders, prompts, extraction, grading
    {"cascade"},  # cascades that read the answers: agreement by the graders, chains, their search
    {"policy"},  # what a user deploys: the one target, best-single rule, target rule and paired comparison
    {"tournament", "validation", "replay", "training", "evaluation", "gateway", "labels"},  # one package per concern
    {"loop"},  # from serving back to learning: capture to queries, the gated promotion
    {"config"},  # the typed params file: every package's config, under one root
    {"stages"},  # one module per dvc.yaml stage: params -> library -> outputs + MLflow
    {"commands"},  # the commands that are not stages
    {"cli"},
    {"__main__"},
]
ORCHESTRATION = ("prefect", "prefect_dask", "distributed", "flows", "tasks")  # above the library, never in it


def _layer_of(unit: str) -> int:
    found = [i for i, units in enumerate(LAYERS) if unit in units]
    assert found, f"jouleroute/{unit}: not in any layer of tests/test_architecture.py (add it, and to " \
                  "docs/architecture.md)"
    return found[0]


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement, lazy ones inside functions included."""
    tree = ast.parse(path.read_text(), str(path))
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from pkg import name` may name a submodule: count it as one when it is
            found += [(node.lineno, f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base) for a in node.names]
    return found


def _is_module(name: str) -> bool:
    path = REPO / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


SOURCES = sorted(LIB.rglob("*.py"))


def test_no_upward_or_sideways_import_between_layers():
    offenders = []
    for path in SOURCES:
        unit = path.relative_to(LIB).parts[0].removesuffix(".py")
        for line, name in _imports(path):
            parts = name.split(".")
            if parts[0] != "jouleroute" or len(parts) < 2 or parts[1] == unit:
                continue
            if _layer_of(parts[1]) >= _layer_of(unit):
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {name} "
                                 f"(layer {_layer_of(parts[1])} from layer {_layer_of(unit)})")
    assert offenders == [], "\n".join(offenders)


def test_no_import_circle_between_modules():
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        graph[_module(path)] = {name for _, name in _imports(path) if name.startswith("jouleroute.")
                                and _is_module(name) and name != _module(path)}
    # a package's __init__ re-exporting its own modules is not a circle: drop edges into an ancestor package
    for module, deps in graph.items():
        graph[module] = {d for d in deps if not module.startswith(d + ".")}
    circles, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                circles.append(" -> ".join(trail[trail.index(dep):] + [node, dep]) if dep in trail
                               else f"{node} -> {dep}")
            elif dep not in state:
                visit(dep, trail + [node])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert circles == [], "\n".join(circles)


def test_library_never_imports_prefect_or_the_flows():
    offenders = [f"{path.relative_to(REPO)}:{line} {name}" for path in SOURCES for line, name in _imports(path)
                 if name.split(".")[0] in ORCHESTRATION]
    assert offenders == []


DVC_FILES = [table.main_dvc_yaml(REPO), *table.study_dvc_yamls(REPO)]


def _from_root(dvc_yaml: Path, stage: table.Stage, entries) -> list[str]:
    """A stage's literal paths (relative to where it runs, its ``wdir``) relative to the repository."""
    return [os.path.relpath(dvc_yaml.parent / stage.wdir / e, REPO) for e in entries if not e.startswith("$")]


@pytest.mark.parametrize("dvc_yaml", DVC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_stage_is_one_module_and_one_command_of_its_name(dvc_yaml):
    """Stage `x` runs `jouleroute x`, whose code is x_stage in jouleroute/stages/x.py, a dep of the stage."""
    for stage in table.read(dvc_yaml).values():
        module = LIB / "stages" / f"{stage.name}.py"
        assert module.exists(), f"{dvc_yaml.name}: stage {stage.name} has no jouleroute/stages/{stage.name}.py"
        functions = {n.name for n in ast.parse(module.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert f"{stage.name}_stage" in functions, module
        assert stage.cmd.split()[0] == "jouleroute" and stage.cmd.split()[-1] == stage.name, stage.cmd
        assert "&&" not in stage.cmd and ";" not in stage.cmd, f"one command per stage: {stage.cmd}"
        assert f"jouleroute/stages/{stage.name}.py" in _from_root(dvc_yaml, stage, stage.deps), \
            f"{stage.name}: its own code is not a dep"


@pytest.mark.parametrize("study", table.study_dvc_yamls(REPO), ids=lambda p: p.parent.name)
def test_a_study_runs_the_main_pipelines_stages_as_they_are(study):
    """A study stage of the main pipeline's name runs at the root with the same command (plus the study's params
    file), the same code deps, the same `paths:` inputs and the same params sections (from the study's own params
    file): the study cannot drift from the pipeline."""
    main = table.read(table.main_dvc_yaml(REPO))
    params_file = f"{study.parent.relative_to(REPO)}/params.yaml"
    shared = [name for name in table.read(study) if name in main]
    assert shared, study
    for name in shared:
        mine, theirs = table.read(study)[name], main[name]
        assert sorted(_from_root(study, mine, mine.deps)) == sorted(_from_root(REPO / "dvc.yaml", theirs, theirs.deps))
        assert sorted(table.path_names(mine.deps)) == sorted(table.path_names(theirs.deps)), name
        assert sorted(mine.params) == sorted(theirs.params), name
        assert mine.cmd == f"jouleroute --params {params_file} {name}", mine.cmd


@pytest.mark.parametrize("study", table.study_dvc_yamls(REPO), ids=lambda p: p.parent.name)
def test_a_study_runs_at_the_root_and_keeps_its_outputs_in_its_folder(study):
    """One rule for every params file (issue 41): a study's stages run at the repository root (``wdir``), so its
    `paths:` are root-relative like params.yaml's; its outputs lie in its folder, beside its params and lock, and
    its shared inputs and caches are the main pipeline's. It is no DVC repository of its own."""
    from jouleroute.config import load_params

    folder = study.parent.relative_to(REPO).as_posix()
    assert not (study.parent / ".dvc").exists() and not (study.parent / ".dvcignore").exists()
    for stage in table.read(study).values():
        assert os.path.normpath(study.parent / stage.wdir) == str(REPO), (stage.name, stage.wdir)
        for out in _from_root(study, stage, stage.outs):
            assert out.startswith(f"{folder}/") or out.startswith("docs/"), (stage.name, out)
    paths = load_params(study.parent / "params.yaml").paths
    # a no-gold preset (scripts/no_gold_studies.py) reads another pipeline's profile: its labels are its own
    assert paths.labelled_profile.startswith(f"{folder}/artifacts/")
    assert paths.embedding_cache == "artifacts/cache/embeddings"
    assert paths.data_manifest == "data/manifest.yaml" and paths.models_dir == "artifacts/models"
    assert paths.headline == f"{folder}/metrics.json"


def _params_file_of(dvc_yaml: Path) -> Path:
    return REPO / "params.yaml" if dvc_yaml == table.main_dvc_yaml(REPO) else dvc_yaml.parent / "params.yaml"


@pytest.mark.parametrize("dvc_yaml", DVC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_params_key_a_stage_lists_is_in_its_params_file(dvc_yaml):
    """DVC refuses to run a stage whose params key is absent from the file (a key listed to depend on exactly
    what a stage reads, e.g. `router.batch_size` instead of all of `router`, must be written out there)."""
    import yaml

    raw = yaml.safe_load(_params_file_of(dvc_yaml).read_text())
    for stage in table.read(dvc_yaml).values():
        for key in stage.params:
            node = raw
            for part in key.split("."):
                assert isinstance(node, dict) and part in node, f"{dvc_yaml.name}: {stage.name} lists {key}, absent"
                node = node[part]


def test_a_lambda_experiment_reruns_only_what_reads_the_deployed_lambda():
    """`-S router.lam=...` changes which candidate the deployed router picks: evaluate's figures and the
    report that quotes them. Training, its held-out check and the budget curve route at every λ."""
    assert table.rerun_by("router.lam", REPO / "dvc.yaml") == ["evaluate", "embedded_page"]
    for dvc_yaml in DVC_FILES:
        stages = table.read(dvc_yaml)
        for name in [n for n in ("sft", "grpo", "budget") if n in stages]:  # a no-gold preset has no budget
            params = stages[name].params
            assert "router" not in params and "router.lam" not in params, (dvc_yaml, name)


def test_router_families_are_listed_in_one_table():
    """No module names two router families side by side (a tuple, list, set or Literal of their names):
    every reader asks ``jouleroute.routing.families``, where each family registered itself."""
    from jouleroute.routing.families import router_families

    names = set(router_families())
    own = {REPO / "jouleroute/routing/families.py"}
    found = []
    for path in [*sorted(LIB.rglob("*.py")), *sorted((REPO / "scripts").rglob("*.py"))]:
        if path in own:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
            listed = {e.value for e in items if isinstance(e, ast.Constant) and e.value in names}
            if len(listed) >= 2:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {sorted(listed)}")
    assert not found, "router families listed outside jouleroute/routing/families.py:\n" + "\n".join(found)


def test_public_pools_are_named_in_one_table():
    """A public pool is declared once, in its module of jouleroute/replay/pools/ (its folder, models, split rule and
    page title): no other module or script names it, its study folder, its data folder or its page's title; the
    importer, the preset generator and the study page read the table."""
    from jouleroute.replay.pools import public_pools

    found = []
    for pool in public_pools().values():
        own = REPO / Path(*pool.read.__module__.split(".")).with_suffix(".py")
        names = {pool.name, pool.study, pool.folder, pool.title}
        for path in [*sorted(LIB.rglob("*.py")), *sorted((REPO / "scripts").rglob("*.py"))]:
            if path == own:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                        node.value in names or pool.folder in node.value or pool.title in node.value):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "public pools named outside jouleroute/replay/pools/<pool>.py:\n" + "\n".join(found)


def test_reading_params_and_the_family_table_imports_no_torch_or_sklearn():
    """Every command validates params, which reads the family table: a family imports its heavy libraries where it
    fits (and its helpers live in `_`-named modules), so `check-params`, `where` or `prepare` start without them."""
    import subprocess
    import sys

    code = ("import sys; from jouleroute.config import load_params; load_params('params.yaml'); "
            "from jouleroute.routing.families import router_families; assert len(router_families()) > 3; "
            "print(sorted(m for m in ('torch', 'sklearn', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"reading params imported {out.stdout.strip()}"


def _module_path(name: str) -> Path | None:
    path = REPO / Path(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_no_stage_module_imports_another_stage_module():
    """What two stages share lives in a module that is no stage (stages/context.py, tournament_inputs.py, router_training.py)."""
    stages = {name for path in DVC_FILES for name in table.stage_order(path)}
    offenders = []
    for stage in stages:
        path = LIB / "stages" / f"{stage}.py"
        for line, name in _imports(path):
            other = name.removeprefix("jouleroute.stages.").split(".")[0] if name.startswith("jouleroute.stages.") else ""
            if other in stages and other != stage:
                offenders.append(f"jouleroute/stages/{stage}.py:{line} imports the stage module {name}")
    assert not offenders, "\n".join(offenders)


def test_nothing_the_tournament_stage_imports_comes_from_training():
    """Data flows forward: the first compute stage never runs training code, directly or not. ``jouleroute.config``
    is not followed: it gathers every package's config class into the params file by design (the tournament
    reads its own sections of it)."""
    seen, todo, chain = set(), ["jouleroute.stages.tournament"], {"jouleroute.stages.tournament": None}
    while todo:
        module = todo.pop()
        if module in seen or module == "jouleroute.config":
            continue
        seen.add(module)
        path = _module_path(module)
        if path is None:
            continue
        for _, name in _imports(path):
            if name.startswith("jouleroute") and name not in chain:
                chain[name] = module
                todo.append(name)
    reached = sorted(m for m in seen if m == "jouleroute.training" or m.startswith("jouleroute.training."))

    def path_to(module: str) -> str:
        steps = [module]
        while chain.get(steps[-1]):
            steps.append(chain[steps[-1]])
        return " <- ".join(steps)

    assert not reached, "the tournament stage reaches training/:\n" + "\n".join(map(path_to, reached))


def test_no_stage_finds_a_run_by_recency():
    """A stage that writes into another stage's MLflow run finds it by the id that stage recorded in its outputs
    (``grpo_dir/mlflow_run.json``), never by searching runs or versions (``jouleroute where``, a command that only
    shows the latest runs, may)."""
    offenders = []
    for path in SOURCES:
        if path.relative_to(LIB).parts[0] in ("commands", "cli.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("search_runs", "search_model_versions"):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.attr}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("dvc_yaml", DVC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_stage_logs_the_params_dvc_yaml_says_it_depends_on(dvc_yaml, tmp_path):
    """What a stage's MLflow run logs as params is what its dvc.yaml entry lists (``StageContext.logged_params``),
    and no stage picks its own sections (``stage_run`` takes none)."""
    from jouleroute.config import load_params
    from jouleroute.stages.context import StageContext

    params_path = dvc_yaml.parent / "params.yaml"
    ctx = StageContext(load_params(params_path), REPO, params_path)
    for name, stage in table.read(dvc_yaml).items():
        logged = {key for key in ctx.logged_params(name)}
        for key in stage.params:
            assert any(k == key or k.startswith(key + ".") for k in logged) or _empty(ctx, key), (name, key)
        assert all(any(k == key or k.startswith(key + ".") for key in stage.params) for k in logged), name
    for path in sorted((LIB / "stages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "stage_run":
                assert not [k.arg for k in node.keywords if k.arg == "sections"], f"{path.name}:{node.lineno}"


def _empty(ctx, key: str) -> bool:
    """A params key whose value is null or empty logs nothing (e.g. `replay` in the main params)."""
    value = ctx.params.model_dump(mode="json", by_alias=True)
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value in (None, {}, [])


def test_the_roots_dvc_holds_every_pipeline():
    """One DVC repository (issue 41): the root's `dvc status` and `dvc dag` see the main pipeline and every study, and
    a study's `sft` reads the main pipeline's converted models. A loop workspace (`loops/<name>/`, docs/loop.md) is
    a pipeline of the same repository too, with its traffic's `data/*.dvc` versions: on a machine where a loop ran
    (benchmarks/bench_loop.py) its dvc.yaml and .dvc files are there, and only those of a folder `--init` made (its
    loop.yaml beside them)."""
    from dvc.repo import Repo

    loops = {path.parent for path in REPO.glob("loops/*/loop.yaml")}
    with Repo(str(REPO)) as repo:
        files = {Path(s.path).resolve() for s in repo.index.stages}
        looped = {f for f in files if any(f.is_relative_to(loop) for loop in loops)}
        assert looped <= {p for loop in loops for p in [loop / "dvc.yaml", *(loop / "data").glob("*.dvc")]}
        assert files - looped == {REPO / "dvc.yaml", *table.study_dvc_yamls(REPO)}
        study = table.study_dvc_yamls(REPO)[0]
        sft = repo.stage.collect(f"{study.relative_to(REPO)}:sft")[0]
        assert "models" in {s.addressing for s in repo.index.graph.successors(sft)}
