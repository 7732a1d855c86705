"""Rebuild the bundled benchmark subsets from full local copies (a one-off, not run by the pipeline).

Usage: python data/benchmarks/bundle_subsets.py /path/to/full/benchmarks data/benchmarks

The full copies use the same layout as the bundle (``<task>/<file>``). Every subset is a prefix
of its source file (or of each MMLU subject / BBH sub-task), so a query keeps the same id and
row number whether it is read from the bundle or from the full file. Each task's SOURCE.txt is
copied from the source folder and one line is appended that says what was kept.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import defaultdict
from pathlib import Path

# task -> {file: rows kept (None = whole file)}
JSONL_PREFIXES = {
    "gsm8k": {"test.jsonl": 300, "train.jsonl": 20},
    "math500": {"test.jsonl": None},
    "arc_challenge": {"test.jsonl": 300, "validation.jsonl": 25},
    "arc_easy": {"test.jsonl": 300, "validation.jsonl": 25},
    "hellaswag": {"validation.jsonl": 310},
}
MMLU_PER_SUBJECT = 5
BBH_PER_SUBTASK = 30


def _copy_prefix(src: Path, dst: Path, rows: int | None) -> str:
    lines = src.read_bytes().splitlines(keepends=True)
    kept = lines if rows is None else lines[:rows]
    dst.write_bytes(b"".join(kept))
    return f"{dst.name}: whole file ({len(kept)} rows)" if rows is None else f"{dst.name}: first {len(kept)} rows"


def _copy_mmlu(src_dir: Path, dst_dir: Path) -> list[str]:
    per_subject: dict[str, list[bytes]] = defaultdict(list)
    for line in (src_dir / "test.jsonl").read_bytes().splitlines(keepends=True):
        subject = json.loads(line)["subject"]
        if len(per_subject[subject]) < MMLU_PER_SUBJECT:
            per_subject[subject].append(line)
    kept = [line for subject in per_subject for line in per_subject[subject]]  # file order of subjects
    (dst_dir / "test.jsonl").write_bytes(b"".join(kept))
    shutil.copyfile(src_dir / "dev.jsonl", dst_dir / "dev.jsonl")
    return [
        f"test.jsonl: first {MMLU_PER_SUBJECT} rows of each of the {len(per_subject)} subjects, "
        f"in file order ({len(kept)} rows)",
        "dev.jsonl: whole file (few-shot exemplars); validation.jsonl not copied",
    ]


def _copy_bbh(src_dir: Path, dst_dir: Path) -> list[str]:
    for path in sorted(src_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        doc["examples"] = doc["examples"][:BBH_PER_SUBTASK]
        (dst_dir / path.name).write_text(json.dumps(doc))
    shutil.copytree(src_dir / "cot-prompts", dst_dir / "cot-prompts", dirs_exist_ok=True)
    shutil.copyfile(src_dir / "README.md", dst_dir / "README.md")
    return [
        f"<sub-task>.json: first {BBH_PER_SUBTASK} examples of each of the 27 sub-tasks "
        "(re-serialized with json.dumps)",
        "cot-prompts/: all 27 files, unchanged (few-shot exemplars)",
    ]


def main(src_root: Path, dst_root: Path) -> None:
    for task in ["gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh"]:
        src, dst = src_root / task, dst_root / task
        dst.mkdir(parents=True, exist_ok=True)
        if task == "mmlu":
            notes = _copy_mmlu(src, dst)
        elif task == "bbh":
            notes = _copy_bbh(src, dst)
        else:
            notes = [_copy_prefix(src / f, dst / f, n) for f, n in JSONL_PREFIXES[task].items()]
        if (src / "LICENSE").exists():
            shutil.copyfile(src / "LICENSE", dst / "LICENSE")
        source = (src / "SOURCE.txt").read_text().rstrip("\n")
        note = "; ".join(notes)
        (dst / "SOURCE.txt").write_text(
            f"{source}\nBundled in jouleroute (data/benchmarks/bundle_subsets.py): {note}.\n"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
