"""A served pool's params: per-entry servers and meters, checked before anything runs; one line per problem."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def served(tmp_path: Path, **changes) -> Path:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["backend"]["kind"] = "openai"
    params["models"]["gemma3-270m"] = {"source": "served", "served_name": "gemma3-270m"}
    for cand in params["pool"]:
        cand |= {"answer_style": "direct", "base_url": "http://node1:8000/v1",
                 "energy": {"exporter_url": "http://node1:9400/metrics", "gpus": [0],
                            "reference": "mistralai/Mistral-7B-Instruct-v0.3"}}
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            params[section][name] = value
        else:
            params[section] = value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def cli(capsys, *argv: str) -> subprocess.CompletedProcess:
    """`jouleroute ARGV` through the CLI's own entry point, in this process."""
    from jouleroute.cli import main

    status = main(list(argv))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), status, out.out, out.err)


def check(path: Path, capsys) -> subprocess.CompletedProcess:
    return cli(capsys, "check-params", "--params", str(path))


def test_a_served_pool_with_its_servers_and_exporters_passes(tmp_path):
    from jouleroute.config import load_params

    params = load_params(served(tmp_path))
    assert {c.base_url for c in params.pool} == {"http://node1:8000/v1"}
    assert params.pool[0].energy.gpus == [0]


def test_a_served_entry_without_energy_is_refused_unless_the_client_estimate_is_asked_for(tmp_path):
    from jouleroute.config import ParamsError, load_params

    path = served(tmp_path)
    raw = yaml.safe_load(path.read_text())
    del raw["pool"][1]["energy"]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match=r"pool\.1\.energy: served candidate .* this client's CPU time is not"):
        load_params(path)
    raw["energy"]["served_client_estimate"] = True
    path.write_text(yaml.safe_dump(raw))
    load_params(path)


def test_an_exporter_needs_its_gpus_and_the_fallback_needs_a_reference(tmp_path):
    from jouleroute.pool import ServedEnergy

    with pytest.raises(ValueError, match="exporter_url and gpus go together"):
        ServedEnergy(exporter_url="http://n:9400/metrics", reference="x")
    with pytest.raises(ValueError, match="name reference"):
        ServedEnergy(exporter_url="http://n:9400/metrics", gpus=[0])


def test_a_served_router_base_model_and_loglik_over_http_are_one_line_each(tmp_path, capsys):
    done = check(served(tmp_path, sft__base_model="gemma3-270m"), capsys)
    assert done.returncode == 1
    assert "sft.base_model: 'gemma3-270m' is a served model" in done.stderr and "local folder" in done.stderr
    path = served(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["pool"][0]["answer_style"] = "loglik"
    path.write_text(yaml.safe_dump(raw))
    done = check(path, capsys)
    assert done.returncode == 1 and "pool.0.answer_style: 'loglik' needs backend.kind 'transformers'" in done.stderr
    assert "{" not in done.stderr and len(done.stderr.splitlines()) == 1  # the advice in one line, never the params dict


def test_requests_to_one_server_share_its_limit_and_other_servers_have_their_own():
    from jouleroute.backends.openai_backend import server_slots

    one = server_slots("http://node1:8000/v1/", 2)
    assert server_slots("http://node1:8000/v1", 8) is one
    assert server_slots("http://node2:8000/v1", 2) is not one
    assert one.acquire(blocking=False) and one.acquire(blocking=False) and not one.acquire(blocking=False)
    one.release()
    one.release()


def test_serve_model_names_what_it_can_serve(tmp_path, capsys):
    path = served(tmp_path)
    done = cli(capsys, "serve-model", "nope", "--params", str(path))
    assert done.returncode == 1 and "serve-model nope: neither a transformers folder" in done.stderr
    assert "'smollm2-135m'" in done.stderr and "Traceback" not in done.stderr
    done = cli(capsys, "serve-model", "gemma3-270m", "--params", str(path))
    assert done.returncode == 1 and "source 'served' is not a local model" in done.stderr
