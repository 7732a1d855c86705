"""Which stages a run left stale, as DVC sees them (never a hard-coded list).

A tournament run on Dask measures energy on other processes than a serial run, so its
profile differs in ``energy_j`` even where every answer is the same: every stage that
reads the profile, and everything after those, must run again. The flow says so.
"""

from __future__ import annotations

from pathlib import Path


def stale_stages(root: Path, dvc_yaml: Path) -> list[str]:
    """Stages of ``dvc_yaml`` that `dvc repro` would rerun now, in pipeline order.

    DVC's status names the stages whose own deps, params or outs changed; the stages
    downstream of those (DVC's stage graph) follow once they rerun, so they are stale too.
    """
    import networkx as nx
    from dvc.repo import Repo

    dvc_yaml = Path(dvc_yaml).resolve()
    with Repo(str(root)) as repo:
        stages = [s for s in repo.index.stages if Path(s.path).resolve() == dvc_yaml]
        status = repo.status(targets=[str(dvc_yaml)])
        changed = [s for s in stages if s.addressing in status]
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        downstream = {a for s in changed for a in nx.ancestors(graph, s)}
        stale = {s.name for s in [*changed, *downstream] if s in stages}
        return [s.name for s in stages if s.name in stale]
