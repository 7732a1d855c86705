"""docs/architecture.md's "Adding a router family", followed literally: the page's module, written to a file
as it stands, is the whole edit. In process, the family is trained and swept by the real evaluate stage, is a
champion contender on val and is served by the gateway's router builder; in a subprocess, the same module
shipped as an entry point of another package (the page's toml) makes `jouleroute check-params` accept its
params sub-section, which fails without it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from jouleroute.routing import families

ROOT = Path(__file__).resolve().parents[2]


def _recipe() -> tuple[str, str]:
    """The recipe's python module and its toml entry point, from the page."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("### Adding a router family", 1)[1].split("\n## ", 1)[0]
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    toml = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    return python, toml


@pytest.fixture
def prior_family(tmp_path, monkeypatch):
    """The page's module as jouleroute/routing/baselines/prior.py, found the way the table finds every family: the
    table's discovery (pkgutil over the package's folders) runs again with the file in a folder of the package,
    and imports it. The table, the package's folders and sys.modules are restored afterwards."""
    import jouleroute.routing.baselines as package

    families.router_families()  # the built-in families are imported (and registered) once
    monkeypatch.setattr(families, "_TABLE", dict(families._TABLE))
    monkeypatch.setattr(families, "_discovered", False)
    folder = tmp_path / "baselines"
    folder.mkdir()
    (folder / "prior.py").write_text(_recipe()[0])
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, f"{families.PACKAGE}.prior", raising=False)
    assert "prior" not in families._TABLE
    yield families.get_family("prior")  # reading the table discovers the new module
    sys.modules.pop(f"{families.PACKAGE}.prior", None)


def test_the_recipes_family_is_trained_evaluated_a_contender_and_servable(tmp_path, prior_family):
    from jouleroute.energy import make_meter
    from jouleroute.gateway.router_build import build_router as gateway_router
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.stages.evaluate import evaluate_stage
    from tests.evaluation.test_val_contest import _data, _stage_repo

    assert prior_family.learned and families.learned_families()[-1] == "prior"
    profile, queries = _data()
    root = tmp_path / "repo"
    root.mkdir()
    ctx = _stage_repo(root, profile, queries)
    params = yaml.safe_load(ctx.params_path.read_text())
    params["baselines"] |= {"families": ["knn", "prior"], "prior": {"shrink": 0.1}}
    ctx.params_path.write_text(yaml.safe_dump(params))
    from jouleroute.config import load_params
    from jouleroute.stages.context import StageContext

    ctx = StageContext(load_params(ctx.params_path), root, ctx.params_path)
    assert ctx.params.baselines.section("prior").shrink == 0.1
    report = evaluate_stage(ctx).report
    assert {"prior", "knn"} <= set(report["families"])  # trained on train, swept on test
    assert "prior" in {c["family"] for c in report["val_contest"]["contenders"]}  # a champion contender on val
    served = gateway_router(ctx.params, GatewayConfig(router={"kind": "prior"}), root,
                            make_meter(ctx.params.energy))
    assert served.name == "prior" and served.candidates == sorted(profile["candidate_id"].unique())


def test_the_recipes_entry_point_makes_params_accept_the_family(tmp_path):
    module, toml = _recipe()
    points = tomllib.loads(toml)["project"]["entry-points"][families.ENTRY_POINT_GROUP]
    site = tmp_path / "site"
    for name, target in points.items():
        package, _, leaf = target.rpartition(".")
        (site / package).mkdir(parents=True, exist_ok=True)
        (site / package / "__init__.py").write_text("")
        (site / package / f"{leaf}.py").write_text(module)
    info = site / "my_routers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-routers\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{families.ENTRY_POINT_GROUP}]\n" +
                                           "".join(f"{n} = {t}\n" for n, t in points.items()))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"baselines": {"families": ["knn", "prior"], "prior": {"shrink": 0.2}}}))

    def check(*extra: Path) -> subprocess.CompletedProcess:
        env = os.environ | {"PYTHONPATH": os.pathsep.join([*map(str, extra), str(ROOT)])}
        return subprocess.run([sys.executable, "-m", "jouleroute", "check-params", "--params", str(params)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    without = check()
    assert without.returncode != 0 and "prior" in without.stdout + without.stderr
    with_plugin = check(site)
    assert with_plugin.returncode == 0, with_plugin.stdout + with_plugin.stderr
