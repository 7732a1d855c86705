"""The loop from serving back to learning as a Prefect flow: one task run per step (docs/loop.md).

fold -> data-version -> the loop pipeline's stages (prepare ... evaluate, each a task run of ``flows.pipeline``'s
``dvc repro --single-item``: the stage functions DVC runs, as `jouleroute repro` and `jouleroute-flow run` run
them; the tournament runs only the new pairs) -> gate -> promote -> record. The step functions are
``jouleroute.loop.iteration``'s; ``tasks.loop`` wraps them. A run whose traffic is the one the last decision was
taken on (nothing folded since) ends ``Completed`` with nothing recomputed and no second decision. A failed stage
fails the run with the stage's error and leaves the served version as it was.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.states import Completed, Failed

from flows.pipeline import run_stages
from tasks.loop import data_version_task, fold_task, gate_task, promote_task, record_task


@flow(name="jouleroute-loop")
def loop(params_path: str, root: str = "."):
    """One iteration of the loop whose pipeline is ``params_path`` (a loop workspace's params.yaml)."""
    from jouleroute.loop.iteration import decided_on
    from jouleroute.loop.workspace import Workspace

    logger = get_run_logger()
    ws = Workspace.of(params_path, root)
    folded = fold_task(params_path, str(ws.root))
    data = data_version_task(params_path, str(ws.root))
    earlier = decided_on(ws, data)
    if earlier is not None:
        return Completed(name="Unchanged", message=f"no new traffic since iteration {earlier}: nothing recomputed, "
                                                   "no decision", data=None)
    stages = run_stages(str(ws.params_file), str(ws.root), None, None, 0)
    if stages.is_failed():
        return Failed(message=f"{stages.message} (the served version is unchanged)")
    logger.info("pipeline: %s", stages.message)
    gate = gate_task(params_path, str(ws.root))
    promoted = promote_task(params_path, str(ws.root), gate, data)
    entry = record_task(params_path, str(ws.root), folded, gate, promoted)
    return Completed(message=f"{entry['decision']}: serving {entry['served']} ({entry['reason']})", data=entry)
