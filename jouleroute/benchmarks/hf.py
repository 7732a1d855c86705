"""Read a task's queries from the Hugging Face Hub (``prepare.source: hf``). Needs network.

``datasets`` is imported here, lazily, so the default offline pipeline never touches the Hub.
The Hub copies have the same fields as the bundled files, so the same normalizers apply and
query ids match the bundled ones (row numbers follow the Hub split's order).
"""

from __future__ import annotations

import logging

from jouleroute.benchmarks.registry import Task

log = logging.getLogger(__name__)


def load_hf_docs(task: Task, dataset_id: str) -> list[dict]:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a pinned dependency
        raise RuntimeError("prepare.source 'hf' needs the 'datasets' package") from exc
    found: list[dict] = []
    for config in task.hf.configs:
        log.info("downloading %s (config %s, split %s)", dataset_id, config, task.hf.split)
        try:
            rows = datasets.load_dataset(dataset_id, config, split=task.hf.split)
        except Exception as exc:  # noqa: BLE001 - re-raised with what to check
            raise RuntimeError(
                f"could not load Hugging Face dataset {dataset_id!r} (config {config!r}, split {task.hf.split!r}) "
                f"for task '{task.name}': {exc}. source 'hf' needs network and JOULEROUTE_ONLINE=1; "
                "offline, use source 'bundled' or 'local'."
            ) from exc
        source = f"hf:{dataset_id}" + (f"/{config}" if config else "") + f":{task.hf.split}"
        # BBH ids are "<sub-task>-<row>", as in the bundled "<sub-task>.json" files.
        stem = config if task.name == "bbh" else task.hf.split
        found += task.to_docs(list(enumerate(rows)), source, stem)
    return task.drop_reserved(found)
