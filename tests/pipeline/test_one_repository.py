"""One DVC repository holds the main pipeline and every study (issue 41), under real git and DVC: plain `dvc repro`
runs the root's dvc.yaml only (DVC's default target), a study's stage runs at the root (``wdir``) and keeps its lock
beside it, `jouleroute exp` aims a study's ``-S key=value`` at its params file, and an experiment's name is one
across the pipelines: DVC refuses a name that another pipeline's experiment holds."""

from __future__ import annotations

from argparse import Namespace
from types import SimpleNamespace

import yaml

from jouleroute.commands.exp import exp_command
from tests.pipeline.conftest import BIN, run

MAIN = "stages:\n  main:\n    cmd: echo main > main.txt\n    params: [router.lam]\n    outs: [main.txt]\n"
STUDY = ("stages:\n  s:\n    wdir: ../..\n    cmd: echo s > studies/s/out.txt\n"
         "    params: [{studies/s/params.yaml: [router.lam]}]\n    outs: [studies/s/out.txt]\n")


def test_a_study_is_a_pipeline_of_the_root_repository_and_shares_its_experiment_names(tmp_path, monkeypatch):
    for key, value in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                       "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}.items():
        monkeypatch.setenv(key, value)
    root, study = tmp_path, tmp_path / "studies/s"
    study.mkdir(parents=True)
    for folder, stages in ((root, MAIN), (study, STUDY)):
        (folder / "dvc.yaml").write_text(stages)
        (folder / "params.yaml").write_text("router:\n  lam: 0.5\n")
    run(["git", "init", "-q"], root)
    run([str(BIN / "dvc"), "init", "-q"], root)
    run([str(BIN / "dvc"), "repro"], root)
    assert (root / "main.txt").exists() and not (study / "out.txt").exists()  # the root's dvc.yaml only
    run([str(BIN / "dvc"), "repro", "studies/s/dvc.yaml"], root)
    assert (study / "out.txt").read_text() == "s\n" and (study / "dvc.lock").exists()
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "both pipelines"], root)

    main = SimpleNamespace(root=root, params_path=root / "params.yaml")
    mine = SimpleNamespace(root=root, params_path=study / "params.yaml")
    assert exp_command(mine, Namespace(exp_args=["save", "baseline"])) == 0
    assert exp_command(main, Namespace(exp_args=["save", "baseline"])) != 0  # the study's experiment holds it
    assert exp_command(mine, Namespace(exp_args=["run", "-S", "router.lam=2", "-n", "lam-2"])) == 0
    assert yaml.safe_load((study / "params.yaml").read_text())["router"]["lam"] == 2
    assert yaml.safe_load((root / "params.yaml").read_text())["router"]["lam"] == 0.5
    assert exp_command(main, Namespace(exp_args=["run", "-S", "router.lam=1", "-n", "lam-2"])) != 0  # the study's
    assert yaml.safe_load((root / "params.yaml").read_text())["router"]["lam"] == 0.5
    assert exp_command(main, Namespace(exp_args=["run", "-S", "router.lam=1", "-n", "main-lam-1"])) == 0
    assert yaml.safe_load((root / "params.yaml").read_text())["router"]["lam"] == 1
    listed = run([str(BIN / "dvc"), "exp", "list", "--name-only"], root).stdout.split()
    assert sorted(listed) == ["baseline", "lam-2", "main-lam-1"]
