"""Prefect flows and the scheduled deployment of jouleroute (`jouleroute-flow --help`).

- ``flows.pipeline``: the pipeline and the replay study, stage by stage through DVC.
- ``flows.tournament``: the tournament's shard jobs as Prefect tasks on Dask.
- ``flows.deployment``: the scheduled deployment (cron + timezone, one run at a time), served in the background.
- ``flows.cli``: the ``jouleroute-flow`` command.

Their Prefect tasks, one per stage and one per tournament shard job, live in the top-level ``tasks`` package.

Orchestration sits on top: it imports ``jouleroute``; nothing imports it.
"""
