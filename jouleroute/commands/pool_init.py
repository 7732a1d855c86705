"""`jouleroute import --init DIR [--table FILE]`: a pipeline of its own for a user's outcome table.

Writes ``DIR/params.yaml`` and ``DIR/dvc.yaml`` from the replay study's own files (studies/replay), the way
scripts/heldout_studies.py writes the held-out presets: the same stages with the same deps and params, its
first stage `import` (the table -> queries + profile) in place of `replay`, every output under
``DIR/artifacts/``, its MLflow store in ``mlruns/<name>/``, its headline and report in ``DIR``. Like a study,
``DIR`` is a DVC repository of its own (``subrepo_files``): the root's `dvc status` stays the main pipeline's.
Then `jouleroute --params DIR/params.yaml repro` runs import -> validate -> router_data -> sft -> grpo -> budget
-> evaluate -> study_report, and `jouleroute --params DIR/params.yaml serve` serves its champion
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
    """``{relative path: text}`` of the pipeline's params.yaml, dvc.yaml and the files that make ``folder`` a DVC
    repository of its own (``subrepo_files``)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", Path(folder).name.lower()).strip("-.")
    if not name:
        raise StageFailed(f"--init {folder}: give a folder with a name, e.g. pools/mine")
    table = table or EXAMPLE_TABLE
    up = os.path.relpath(".", folder)  # from the pool's folder to the repository root
    params = (root / STUDY / "params.yaml").read_text()
    params = params[params.index("\n\n") + 2:]  # the study's header comment
    params = _replace(params, "mlruns/replay", f"mlruns/{name}")
    params = _replace(params, "study_doc: ../../docs/replay-study.md   # the study's generated page",
                      "study_doc: report.md   # the pool's generated page")
    params = _replace(params, "../../", f"{up}/")
    params = _replace(params, "profile_source: replay", "profile_source: import_outcomes")
    params = _replace(params, "experiment: jouleroute-replay\n", f"experiment: jouleroute-{name}\n")
    params = re.sub(r"all [\d,]+ (train|val|test) queries", r"all \1 queries", params)
    params = re.sub(r"(?m)^replay:.*\n", _import_section(name, table), params)
    params = params.replace("the study's", "the pool's")
    header = (f"# Your own pool's pipeline ({name}), written by `jouleroute import --init {folder}` from the replay\n"
              f"# study's params (docs/your-own-pool.md). Run it with:  jouleroute --params {folder}/params.yaml repro\n"
              f"# This folder is a DVC repository of its own (its .dvc/ shares the root's cache). `paths:` are relative\n"
              f"# to this folder, as its dvc.yaml's are; every other path (your table) is relative to the repository\n"
              f"# root, where the stages run.\n\n")

    dvc = (root / STUDY / "dvc.yaml").read_text()
    dvc = dvc[dvc.index("stages:"):]
    first, rest = dvc.split("\n\n", 1)
    first = f"""stages:
  import:
    cmd: jouleroute -C {up} --params {folder}/params.yaml import
    deps:
      - {up}/{table}
      - {up}/jouleroute/replay
      - {up}/jouleroute/commands/import_outcomes.py
      - {up}/jouleroute/stages/profile_record.py
      - {up}/jouleroute/tournament/summary.py
      - {up}/data/outcomes/tokenizers/smollm2-135m-instruct   # counts tokens a row does not give (energy.tokenizer_file)
      - {up}/data/external/energy/mlenergy-v2                 # models rows without energy_j (energy.reference_dir)
    params:
      - params.yaml:
          - import_outcomes
          - energy_policy.allow_mixed_sources
    outs:
      - ${{paths.queries}}
      - ${{paths.profile}}
      - artifacts/profile.provenance.parquet
      - ${{paths.profile_meta}}"""
    rest = _replace(rest, "studies/replay/params.yaml", f"{folder}/params.yaml")
    rest = _replace(rest, "-C ../..", f"-C {up}")
    rest = _replace(rest, "- ../../", f"- {up}/")
    rest = _replace(rest, "docs/replay-study.md", "report.md")
    rest = rest.replace("replay study's", "pool's").replace("The study's", "The pool's").replace("the study's", "the pool's")
    dvc = (f"# Your own pool's pipeline ({name}), written by `jouleroute import --init {folder}` (docs/your-own-pool.md):\n"
           f"# the replay study's stages on your outcome table. This folder is a DVC repository of its own: run it with\n"
           f"# `jouleroute --params {folder}/params.yaml repro` (or `dvc repro` here). Stages run from the repository\n"
           f"# root (`jouleroute -C {up}`); deps outside this folder are `{up}/...`.\n" + first + "\n\n" + rest)
    files = {f"{folder}/params.yaml": header + params, f"{folder}/dvc.yaml": dvc}
    return files | subrepo_files(folder)


REMOTE = "jouleroute-dvc-remote"  # the root's default DVC remote: a folder beside the clone (.dvc/config)


def subrepo_files(folder: str) -> dict[str, str]:
    """``{relative path: text}`` that make ``folder`` a DVC repository of its own (what `dvc init --subdir` writes),
    sharing the root's cache and default remote: the root's `dvc status`, `dvc exp` and `dvc checkout` then see the
    main pipeline only, and the folder's pipeline runs with `jouleroute --params FOLDER/params.yaml repro`."""
    depth = len(Path(folder).parts)
    up = "/".join([".."] * (depth + 1))  # from FOLDER/.dvc to the root
    config = ("# A pipeline of its own (a DVC subrepo): the root's `dvc status` lists only the main pipeline.\n"
              "# It shares the root's cache and remote (relative paths resolve from this file).\n"
              "[core]\n    analytics = false\n    autostage = false\n    remote = local\n"
              f"[cache]\n    dir = {up}/.dvc/cache\n"
              f"['remote \"local\"']\n    url = {up}/../{REMOTE}\n")
    return {f"{folder}/.dvc/config": config, f"{folder}/.dvc/.gitignore": "/config.local\n/tmp\n/cache\n",
            f"{folder}/.dvcignore": "# what DVC ignores in this pipeline's folder (https://dvc.org/doc/user-guide/dvcignore)\n",
            f"{folder}/.gitignore": "# the pipeline's outputs (DVC tracks them in dvc.lock)\n/artifacts/\n"}


def init_pool(root: Path, folder: str, table: str | None) -> list[Path]:
    """Write the two files (never over existing ones); the paths written."""
    folder = Path(folder).as_posix().strip("/")
    files = render(folder, table)
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
