"""`jouleroute import --init DIR [--table FILE]`: a pipeline of its own for a user's outcome table.

Writes ``DIR/params.yaml`` and ``DIR/dvc.yaml`` from the replay study's own files (studies/replay), the way
scripts/heldout_studies.py writes the held-out presets: the same stages with the same deps and params, its
first stage `import` (the table -> queries + profile) in place of `replay`, every output under
``DIR/artifacts/``, its MLflow store in ``mlruns/<name>/``, its headline and report in ``DIR``. Like a study's,
its stages run at the repository root (``wdir``), and every path in both files is relative to the root. Then
`jouleroute --params DIR/params.yaml repro` runs import -> labels -> validate -> router_data -> sft -> grpo -> budget ->
evaluate -> study_page, and `jouleroute --params DIR/params.yaml serve` serves its champion
(docs/your-own-pool.md).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jouleroute.stages import StageFailed
from jouleroute.stages.table import REPO

STUDY = "studies/replay"
EXAMPLE_TABLE = "data/outcomes/my_outcomes.csv"


def _replace(text: str, old: str, new: str) -> str:
    if old not in text:
        raise StageFailed(f"{STUDY}: expected to find {old!r}; jouleroute/commands/pool_init.py needs updating")
    return text.replace(old, new)


def _import_section(name: str, table: str) -> str:
    return f"""import_outcomes:            # your table: one row per (query, candidate), columns in docs/replay.md
  input_file: {table}
  source_name: {name}           # backend "import:{name}", run_id "import-{name}-<hash>"
  val_fraction: 0.1            # only when the table has no split column (then by a hash of query_id)
  test_fraction: 0.2
  energy: {{}}                   # how rows without energy_j are modelled (the fields of replay.energy)
  models: {{}}                   # candidate -> ML.ENERGY reference + reason, only for rows without energy_j:
  #   my-7b:
  #     reference: mistralai/Mistral-7B-Instruct-v0.3
  #     reason: our 7B is a Mistral-7B fine-tune
"""


def render(folder: str, table: str | None, root: Path = REPO) -> dict[str, str]:
    """``{relative path: text}`` of the pipeline's params.yaml and dvc.yaml."""
    name = re.sub(r"[^a-z0-9._-]+", "-", Path(folder).name.lower()).strip("-.")
    if not name:
        raise StageFailed(f"--init {folder}: give a folder with a name, e.g. pools/mine")
    table = table or EXAMPLE_TABLE  # repository-relative, or absolute: written as given
    params = (root / STUDY / "params.yaml").read_text()
    params = params[params.index("\n\n") + 2:]  # the study's header comment
    params = _replace(params, "mlruns/replay", f"mlruns/{name}")
    params = _replace(params, "study_doc: docs/replay-study.md   # the study's generated page",
                      f"study_doc: {folder}/report.md   # the pool's generated page")
    params = _replace(params, f"{STUDY}/", f"{folder}/")
    params = _replace(params, "profile_source: replay", "profile_source: import_outcomes")
    params = _replace(params, "experiment: jouleroute-replay\n", f"experiment: jouleroute-{name}\n")
    params = re.sub(r"all [\d,]+ (train|val|test) queries", r"all \1 queries", params)
    params = re.sub(r"(?m)^replay:.*\n", _import_section(name, table), params)
    params = params.replace("the study's", "the pool's")
    header = (f"# Your own pool's pipeline ({name}), written by `jouleroute import --init {folder}` from the replay\n"
              f"# study's params (docs/your-own-pool.md). Run it with:  jouleroute --params {folder}/params.yaml repro\n"
              f"# Every path here is relative to the repository root, where the stages run, as in params.yaml.\n\n")

    dvc = (root / STUDY / "dvc.yaml").read_text()
    dvc = dvc[dvc.index("stages:"):]
    first, rest = dvc.split("\n\n", 1)
    wdir = os.path.relpath(".", folder)  # the repository root, from the pool's folder
    first = f"""stages:
  import:
    wdir: {wdir}
    cmd: jouleroute --params {folder}/params.yaml import
    deps:
      - {table}
      - jouleroute/replay
      - jouleroute/commands/import_outcomes.py
      - jouleroute/stages/profile_record.py
      - jouleroute/tournament/summary.py
      - data/outcomes/tokenizers/smollm2-135m-instruct   # counts tokens a row does not give (energy.tokenizer_file)
      - data/external/energy/mlenergy-v2                 # models rows without energy_j (energy.reference_dir)
    params:
      - {folder}/params.yaml:
          - import_outcomes
          - energy_policy.allow_mixed_sources
    outs:
      - ${{paths.queries}}
      - ${{paths.profile}}
      - {folder}/artifacts/profile.provenance.parquet
      - ${{paths.profile_meta}}"""
    rest = _replace(rest, "wdir: ../..", f"wdir: {wdir}")
    rest = _replace(rest, f"{STUDY}/", f"{folder}/")
    rest = _replace(rest, "docs/replay-study.md", f"{folder}/report.md")
    rest = rest.replace("replay study's", "pool's").replace("The study's", "The pool's").replace("the study's", "the pool's")
    dvc = (f"# Your own pool's pipeline ({name}), written by `jouleroute import --init {folder}` (docs/your-own-pool.md):\n"
           f"# the replay study's stages on your outcome table. Run it with `jouleroute --params {folder}/params.yaml repro`\n"
           f"# (= `dvc repro {folder}/dvc.yaml`). Its stages run at the repository root (wdir {wdir}), as the main\n"
           f"# pipeline's do: every path is relative to the root; its outputs and dvc.lock stay in this folder.\n"
           + first + "\n\n" + rest)
    return {f"{folder}/params.yaml": header + params, f"{folder}/dvc.yaml": dvc}


def pipeline_folder(root: Path, folder: str) -> str:
    """``--init FOLDER`` as a path relative to the repository root, where a pipeline's stages run: an absolute path
    inside the repository is made relative; one outside it (or a relative one climbing out) is refused."""
    path = Path(folder)
    inside = (path if path.is_absolute() else root / path).resolve()
    try:
        return inside.relative_to(root.resolve()).as_posix().strip("/")
    except ValueError:
        raise StageFailed(f"--init {folder}: a pipeline lives inside the repository ({root}), whose stages run at "
                          "its root: give a folder under it, e.g. pools/mine") from None


def init_pool(root: Path, folder: str, table: str | None, files: dict[str, str] | None = None) -> list[Path]:
    """Write the two files (``files``, or those of an outcome table's pipeline) never over existing ones; the
    paths written."""
    folder = pipeline_folder(root, folder)
    files = files or render(folder, table)
    existing = [p for p in files if (root / p).exists()]
    if existing:
        raise StageFailed(f"--init {folder}: {', '.join(existing)} already exist(s); nothing was written")
    written = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
