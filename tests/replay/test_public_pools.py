"""Public outcome pools (jouleroute/replay/pools/, pool_rule.py) on tiny tables in the root's layout."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from jouleroute.replay.config import PublicPoolConfig
from jouleroute.replay.pool_rule import choose_candidates, pareto_front, train_points
from jouleroute.replay.pools import get_pool

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = "data/outcomes/tokenizers/smollm2-135m-instruct/tokenizer.json"


def _cfg(pool: str, folder: Path, models: dict, **extra) -> PublicPoolConfig:
    mapped = {name: {"candidate_id": cid, "j_per_output_token": 1.0, "tpot_s": 0.01, "prefill_tokens_per_s": 1000.0,
                     "reason": "a test figure"} for name, cid in models.items()}
    return PublicPoolConfig(pool=pool, source_dir=str(folder), table="t.parquet", models=mapped,
                            energy={"tokenizer_file": str(REPO / TOKENIZER)}, **extra)


def _zeroeval(folder: Path) -> None:
    folder.mkdir(parents=True)
    pd.DataFrame({"task": ["gsm8k", "gsm8k", "math_l5"], "qid": ["g0", "g1", "0"], "split": ["train", "test", "train"],
                  "question": ["1+1?", "2+2?", "x^2=4, x>0?"], "gold_answer": ["2", "4", "2"]}).to_csv(
        folder / "questions.csv", index=False)
    rows = {"gsm8k": [("g0", "a", "2", 1, "ok", 40), ("g0", "b", "3", 0, "ok", 400), ("g1", "a", "4", 1, "ok", 40),
                      ("g1", "b", "", 0, "empty", 0)],
            "math_l5": [("0", "a", "\\frac{4}{2}", 1, "ok", 80), ("0", "b", "-2", 0, "ok", 800)]}
    for task, items in rows.items():
        pd.DataFrame([{"task": task, "qid": q, "model": m, "status": st, "output_chars": ch, "answer_simple": ans,
                       "answer_source": "json", "correct_simple": ok, "output_tail": f"so the answer is {ans}"}
                      for q, m, ans, ok, st, ch in items]).to_csv(folder / f"outcomes_{task}.csv.gz", index=False)


def test_zeroeval_is_regraded_by_the_project_graders_and_tokens_follow_the_length(tmp_path):
    _zeroeval(tmp_path / "z")
    cfg = _cfg("zeroeval_math", tmp_path / "z", {"a": "model-a", "b": "model-b"}, val_fraction=0.0)
    built = get_pool("zeroeval_math").read(cfg, REPO)
    table = built.table.set_index(["query_id", "candidate"])
    assert table.loc[("zeroeval/math_l5/0", "model-a"), "correct"] == 1  # math-verify: 4/2 = 2
    assert table.loc[("zeroeval/gsm8k/g1", "model-b"), "correct"] == 0  # an empty answer is wrong
    assert built.notes["grading_agreement_with_shipped_check"] == 1.0
    a, b = (table.xs(c, level="candidate")["output_tokens"] for c in ("model-a", "model-b"))
    assert (b.loc["zeroeval/gsm8k/g0"] > 5 * a.loc["zeroeval/gsm8k/g0"]) and b.loc["zeroeval/gsm8k/g1"] == 0
    assert set(built.table["split"]) == {"train", "test"}


def test_cruxeval_keeps_pass_at_1_as_an_expectation_and_refuses_outside_0_1(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    pd.DataFrame({"model": ["m", "m+cot"], "prompting": ["direct", "cot"]}).to_csv(folder / "models.csv", index=False)
    for task in ("input", "output"):
        for split in ("train", "test"):
            ids = ["sample_1", "sample_2"] if split == "train" else ["sample_3", "sample_4"]  # a function, one split
            pd.DataFrame({"sample_id": ids, "prompt": ["f(1)", "f(2)"],
                          "eval_name": f"cruxeval_{task}", "reference": ["1", "2"], "m": [0.3, 1.0],
                          "m+cot": [0.7, 0.0]}).to_csv(folder / f"cruxeval_{task}_{split}.csv", index=False)
    cfg = _cfg("cruxeval", folder, {"m": "m-direct", "m+cot": "m-cot"})
    table = get_pool("cruxeval").read(cfg, REPO).table
    assert table["correct"].tolist().count(0.3) == 4
    assert set(table.loc[table["candidate"] == "m-cot", "output_tokens"]) == {250}
    # both tasks of a function share its split
    function = table["query_id"].str.rsplit("/", n=1).str[1]
    assert table.groupby(function)["split"].nunique().max() == 1
    bad = pd.read_csv(folder / "cruxeval_output_test.csv").assign(m=[1.5, 0.0])
    bad.to_csv(folder / "cruxeval_output_test.csv", index=False)
    with pytest.raises(ValueError, match=r"cruxeval_output_test.csv row 0 field 'm': pass@1 must be in \[0, 1\]"):
        get_pool("cruxeval").read(cfg, REPO)


def test_the_pool_rule_keeps_the_train_front_and_never_reads_test():
    rows = []
    for cand, acc, joules in [("cheap", 0.5, 10), ("mid", 0.7, 50), ("dominated", 0.6, 80), ("best", 0.9, 200)]:
        for i in range(10):
            rows.append({"query_id": f"q{i}", "candidate_id": cand, "split": "train", "correct": float(i < acc * 10),
                         "energy_j": float(joules)})
            rows.append({"query_id": f"t{i}", "candidate_id": cand, "split": "test",
                         "correct": float(cand == "dominated"), "energy_j": 1.0})  # test must not matter
    profile = pd.DataFrame(rows)
    assert pareto_front(train_points(profile)) == ["cheap", "mid", "best"]
    chosen, table = choose_candidates(profile, PublicPoolConfig.model_fields["rule"].default.model_copy(
        update={"max_candidates": 2}))
    assert chosen == ["cheap", "best"] and table.loc["dominated", "on_front"] == False  # noqa: E712


def test_presets_are_what_the_generator_writes_from_the_replay_study():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "scripts/public_pool_studies.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_undeclared_pool_is_refused_naming_the_declared_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown public pool 'zeroeval'; valid: cruxeval, zeroeval_math"):
        _cfg("zeroeval", tmp_path, {"a": "model-a", "b": "model-b"})


def test_every_pool_has_its_study_preset_and_its_page_title():
    """A pool declared in jouleroute/replay/pools/ has a generated study whose params name it and its folder."""
    import yaml

    from jouleroute.replay.pools import public_pools

    for name, pool in public_pools().items():
        params = yaml.safe_load((REPO / "studies" / pool.study / "params.yaml").read_text())
        assert params["public_pool"]["pool"] == name
        assert params["public_pool"]["source_dir"] == f"{params['paths']['data_root']}/{pool.folder}"
        assert params["public_pool"]["models"] == pool.models and pool.title and pool.origin
