"""Prefect tasks: thin wrappers, one per stage, around the very stage functions DVC's commands call.

- ``tasks.stage``: a stage as a task, run through ``dvc repro --single-item`` (DVC decides
  whether it is stale and keeps ``dvc.lock`` true), its log streamed into the task's log.
- ``tasks.version``: the version a task run carries, computed when it runs from the
  stage's DVC deps and params.
- ``tasks.shard``: one tournament job (a few batches of one candidate) as a task, for Dask.

Nothing in ``jouleroute/`` imports this package.
"""
