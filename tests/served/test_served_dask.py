"""docs/cluster.md step 3 on Dask: the served pool's tournament as Prefect tasks on a Dask cluster.

The same two servers and exporter processes as test_served_tournament.py (their counters stubbed at the NVML
boundary, tests/served/stub_counter.py); the shard jobs run on Dask workers, which ask the servers and read
the exporters themselves. Every row must be measured on its own node, as in the serial run.
"""

from __future__ import annotations

import pytest

from tests.orchestration.conftest import prefect_server  # noqa: F401  (the real Prefect server fixture)
from tests.served.conftest import IDLE_W
from tests.served.test_served_tournament import PER_TOKEN, make_root, served_params

pytestmark = pytest.mark.timeout(600)


def test_the_tournament_on_dask_measures_every_row_on_its_own_node(pool, tmp_path, prefect_server):  # noqa: F811
    import pandas as pd
    from distributed import LocalCluster

    from flows.tournament import run_on_dask

    exporters = {n: pool[n]["exporter"] for n in ("a", "b")}
    root = make_root(tmp_path, served_params(pool, exporters))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        state = run_on_dask(str(root / "params.yaml"), str(root), dask_address=cluster.scheduler_address,
                            batches_per_job=1, return_state=True)
    assert state.is_completed(), state
    profile = pd.read_parquet(root / "artifacts/tournament/profile.parquet")
    assert not profile.duplicated(["query_id", "candidate_id"]).any()
    assert set(profile["energy_source"]) == {"measured-nvml"}
    for name, cand in (("a", "short"), ("b", "long")):
        rows = profile[profile["candidate_id"] == cand]
        assert len(rows) == profile["query_id"].nunique()
        assert rows["energy_attribution"].str.contains(f"meter=exporter:{exporters[name]}", regex=False).all()
        assert rows["idle_power_w"].iloc[0] == pytest.approx(IDLE_W, rel=0.15)
        # a shard's windows hold only its own server's requests: the counter's rise is this candidate's tokens
        assert rows["energy_net_j"].sum() == pytest.approx(PER_TOKEN * rows["output_tokens"].sum(), rel=0.05)
