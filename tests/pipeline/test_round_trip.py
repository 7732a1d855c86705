"""The round trip a new user makes (README "Experiments: try, compare, go back"), under real DVC and git:

a clone holds the reference run committed from another machine (its outputs are not in this cache) and
a study pipeline that has not run; `make run` leaves the local run in the workspace (`M dvc.lock`);
`jouleroute exp save baseline` keeps it; `jouleroute exp run -S +router.target.energy_share=0.5` is the experiment (a
typo in -S is refused before params.yaml changes), `jouleroute exp show` the comparison, and
`jouleroute exp apply` goes back to the baseline or keeps the experiment. No output is ever deleted,
the tournament never reruns, and the venv is not on PATH (`.venv/bin/jouleroute ...`, `.venv/bin/dvc`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os

import pytest
import yaml

from jouleroute.stages.table import rerun_by
from tests.pipeline.conftest import BIN, run
from tests.pipeline.dvc_helpers import ran
from tests.pipeline.test_dvc_pipeline import reproduced, scratch  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.timeout(1200), pytest.mark.integration]

DVC, JOULEROUTE = str(BIN / "dvc"), str(BIN / "jouleroute")
# the user's shell: the venv is not activated (`.venv/bin/jouleroute` by its path): `jouleroute exp` puts the venv's
# bin/ first on PATH for DVC, which runs the stage commands (`jouleroute <stage>`)
NO_VENV = {"PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != str(BIN)),
           "VIRTUAL_ENV": ""}


def dvc(root, *args):
    return run([DVC, *args], root, env=NO_VENV)


def exp(root, *args, check=True):
    return run([JOULEROUTE, "exp", *args], root, env=NO_VENV, check=check)


def outputs(lock: dict) -> list[str]:
    return [out["path"] for stage in lock["stages"].values() for out in stage.get("outs", [])]


def foreign(lock: dict) -> dict:
    """The same lock as another machine writes it: every output has other contents (other hashes)."""
    lock = json.loads(json.dumps(lock))
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            if "md5" in out:
                suffix = ".dir" if out["md5"].endswith(".dir") else ""
                out["md5"] = hashlib.md5((out["md5"] + "elsewhere").encode()).hexdigest() + suffix
    return lock


def exp_show(root) -> dict[str, dict]:
    """`dvc exp show --only-changed --drop '.*/.*'` (the README's comparison) as CSV rows by experiment name."""
    text = exp(root, "show", "--no-pager", "--csv").stdout
    return {row["Experiment"]: row for row in csv.DictReader(io.StringIO(text)) if row["Experiment"]}


def flat(metrics: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in metrics.items():
        out.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def shown(cell: str, value) -> bool:
    """Whether an `exp show --csv` cell shows ``value`` (None: nothing; a number: to 4 significant figures)."""
    if value is None:
        return cell in ("", "-")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(cell) == pytest.approx(value, rel=1e-4)
    return cell == str(value)


def lm_overhead(root) -> dict[str, float]:
    """The LM router's own J/query at each swept λ (artifacts/evaluate/report.json)."""
    report = json.loads((root / "artifacts/evaluate/report.json").read_text())
    return {name: r["views"]["with_overhead"]["overhead_j_per_query"]
            for name, r in report["routers"].items() if name.startswith("lm:")}


def test_experiment_compare_and_go_back_never_delete_an_output(scratch):  # noqa: F811
    root = scratch
    lock_path, metrics_path, profile = root / "dvc.lock", root / "metrics.json", root / "artifacts/tournament/profile.parquet"
    local_lock, local_metrics = lock_path.read_text(), metrics_path.read_text()
    # the clone: a reference run from another machine is committed; the local run is in the workspace
    lock_path.write_text(yaml.safe_dump(foreign(yaml.safe_load(local_lock)), sort_keys=False))
    metrics_path.write_text(json.dumps(json.loads(local_metrics) | {"J": 99.0}))
    study = root / "studies/other/dvc.yaml"  # like studies/replay before `make study`: its outputs are absent
    study.parent.mkdir(parents=True)
    study.write_text("stages:\n  other:\n    cmd: echo other > out.txt\n    outs: [out.txt]\n")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "reference run from another machine"], root)
    lock_path.write_text(local_lock)
    metrics_path.write_text(local_metrics)
    profile_bytes = profile.read_bytes()
    everything = outputs(yaml.safe_load(local_lock))

    def all_outputs_there(step):
        missing = [p for p in everything if not (root / p).exists()]
        assert not missing, f"after {step}: {missing} deleted"
        assert profile.read_bytes() == profile_bytes, f"after {step}: the tournament's profile changed"

    exp(root, "save", "baseline")
    overhead = lm_overhead(root)
    params = (root / "params.yaml").read_text()
    typo = exp(root, "run", "-S", "router.lamb=2.0", check=False)
    assert typo.returncode == 1 and "router.lamb: unknown key (did you mean 'lam'?)" in typo.stderr, typo.stderr
    assert (root / "params.yaml").read_text() == params  # refused before DVC rewrote it
    done = exp(root, "run", "-S", "+router.target.energy_share=0.5", "-n", "half")  # the README's experiment
    # only what reads the target (README, generated from dvc.yaml): training and the budget curve route at every
    # λ, so none of them reruns (`budget` alone took 5.5 of a 7-minute experiment)
    reran = set(rerun_by("router.target", root / "dvc.yaml"))
    assert ran(done.stdout) == {"evaluate", "embedded_page"} == reran, done.stdout
    all_outputs_there("dvc exp run")
    # the router does the same work at another λ: its overhead is the one measured for the baseline, not a
    # new reading of a machine whose load changes (evaluation/overhead.py)
    assert lm_overhead(root) == overhead and min(overhead.values()) > 0, (overhead, lm_overhead(root))
    where = run([str(BIN / "jouleroute"), "where"], root, env=NO_VENV).stdout
    assert "lm overhead\n  (the overhead is estimated, measured once per machine and router" in where, where
    assert max(len(line) for line in where.splitlines()) < 160, where
    experiment = json.loads(metrics_path.read_text())

    rows = exp_show(root)
    base, tried = rows["baseline"], rows["half"]
    share = next(k for k in tried if k.split(":")[-1] == "router.target.energy_share")
    assert float(tried[share]) == 0.5
    before, after = flat(json.loads(local_metrics)), flat(experiment)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= set(base), (changed, list(base))  # every metric that moved is a column
    for key in changed:  # as each side shows it (another kind of policy has no λ: an empty cell)
        assert shown(base[key], before.get(key)) and shown(tried[key], after.get(key)), (key, base, tried)

    exp(root, "apply", "baseline")  # back to the baseline
    assert (root / "params.yaml").read_text() == params
    assert json.loads(metrics_path.read_text()) == json.loads(local_metrics)
    assert lock_path.read_text() == local_lock
    all_outputs_there("dvc exp apply baseline")
    assert "up to date" in dvc(root, "status", "dvc.yaml").stdout  # outputs match the lock: nothing to rerun

    exp(root, "apply", "half")  # or keep the experiment
    assert json.loads(metrics_path.read_text()) == experiment
    all_outputs_there("dvc exp apply half")
    assert "up to date" in dvc(root, "status", "dvc.yaml").stdout
