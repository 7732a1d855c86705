"""A `loglik` candidate in a real tournament: multiple-choice rows are scored, never invalid, and metered
like generated answers; free-form rows of the same candidate are generated."""

from __future__ import annotations

import pandas as pd
import yaml

from tests.pipeline.conftest import BIN, REPO, run, tiny_params


def test_loglik_candidate_is_metered_and_never_invalid(tmp_path, tiny_model):
    params = tiny_params(tiny_model)
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    params["prepare"]["samples"] = {"arc_easy": 3, "hellaswag": 2, "gsm8k": 2, "bbh": 2}
    params["pool"] = [c for c in params["pool"] if c["answer_style"] == "loglik"]
    params["tracking"]["enabled"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext

    for stage in ("prepare", "models"):  # the tournament's inputs (as under dvc repro), in this process: no
        STAGES[stage].run(StageContext.load(tmp_path / "params.yaml", tmp_path))  # interpreter start-up each
    run([str(BIN / "jouleroute"), "--no-progress", "tournament"], tmp_path)  # the tournament itself, by its CLI

    profile = pd.read_parquet(tmp_path / "artifacts/tournament/profile.parquet")
    mc = profile[profile["task"].isin(["arc_easy", "hellaswag"])]
    free = profile[profile["task"] == "gsm8k"]
    assert len(mc) == 5 and len(free) == 2
    assert (mc["invalid"] == 0).all() and (mc["output_tokens"] == 0).all()
    assert mc["output_text"].str.fullmatch(r"Answer: [A-D]").all()
    assert (free["output_tokens"] > 0).all()  # free-form rows were generated
    assert (profile["energy_j"] > 0).all() and (profile["energy_source"] == "estimated").all()
    assert (mc["input_tokens"] > 0).all()
