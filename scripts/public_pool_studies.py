"""Write the public-pool study presets (studies/zeroeval-math/, studies/cruxeval/) from the replay study's files.

Each preset is the replay study (same stages after the profile, same training and evaluation params) on
another public pool of the data root: its first stage is `outcomes` (jouleroute/stages/outcomes.py) instead
of `replay`, and its `public_pool:` section maps the pool's open-weight models to ML.ENERGY references of the
same architecture and size class (each with its reason). Models with no such reference are left out. Which
mapped models become candidates is decided on train by the pool rule. Rerun after editing the replay study;
`--check` (run by the tests) fails when a preset has drifted.

    .venv/bin/python scripts/public_pool_studies.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "studies" / "replay"
sys.path.insert(0, str(ROOT / "scripts"))
from heldout_studies import sync_presets  # noqa: E402  (the same write-or-check loop)


def _m(candidate_id: str, reference: str, reason: str, workload: str = "chat", **extra) -> dict:
    return {"candidate_id": candidate_id, "reference": reference, "workload": workload, **extra, "reason": reason}


L31_8B, L31_70B, L31_405B = ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct",
                             "meta-llama/Meta-Llama-3.1-405B-Instruct")
ZEROEVAL_MODELS = {
    "gemma-2-2b-it": _m("gemma-2-2b-it", "google/gemma-2-2b-it", "the same model"),
    "Phi-3.5-mini-instruct": _m("phi-3.5-mini", "microsoft/Phi-3-mini-4k-instruct",
                                "the same 3.8B Phi-3-mini architecture (32 layers, d_model 3072)"),
    "Meta-Llama-3-8B-Instruct": _m("llama-3-8b", L31_8B, "the same 8B Llama-3 architecture; 3.1 is the measured "
                                                         "revision"),
    "Meta-Llama-3.1-8B-Instruct": _m("llama-3.1-8b", L31_8B, "the same model"),
    "gemma-2-9b-it": _m("gemma-2-9b-it", "google/gemma-2-9b-it", "the same model"),
    "Athene-70B": _m("athene-70b", L31_70B, "a Llama-3-70B fine-tune: the same 70B Llama architecture"),
    "Meta-Llama-3-70B-Instruct": _m("llama-3-70b", L31_70B, "the same 70B Llama-3 architecture; 3.1 is the "
                                                            "measured revision"),
    "Meta-Llama-3.1-70B-Instruct": _m("llama-3.1-70b", L31_70B, "the same model"),
    "Mistral-Large-2": _m("mistral-large-2", "mistralai/Mistral-Large-Instruct-2407",
                          "the same model (Mistral-Large-Instruct-2407)"),
    "Llama-3.1-405B-Inst@sambanova": _m("llama-3.1-405b", L31_405B, "the same model, served by SambaNova"),
}
CL = "codellama/CodeLlama-{}-hf"
CRUXEVAL_MODELS = {
    **{f"codellama-{s}{cot}": _m(f"codellama-{s}{cot.replace('+', '-')}", CL.format(s), "the same model", "code")
       for s in ("7b", "13b", "34b") for cot in ("", "+cot")},
    **{f"codellama-python-{s}": _m(f"codellama-python-{s}", CL.format(s), "a CodeLlama fine-tune: the same "
                                   "architecture", "code") for s in ("7b", "13b", "34b")},
    "codetulu-2-34b": _m("codetulu-2-34b", CL.format("34b"), "a CodeLlama-34B fine-tune", "code"),
    "phind": _m("phind-34b", CL.format("34b"), "Phind-CodeLlama-34B-v2, a CodeLlama-34B fine-tune", "code"),
    "wizard-34b": _m("wizardcoder-34b", CL.format("34b"), "WizardCoder-Python-34B, a CodeLlama-34B fine-tune",
                     "code"),
    "wizard-13b": _m("wizardcoder-13b", CL.format("13b"), "WizardCoder-Python-13B, a CodeLlama-13B fine-tune",
                     "code"),
    "deepseek-base-6.7b": _m("deepseek-coder-6.7b", CL.format("7b"), "a 6.7B Llama-architecture model (32 layers, "
                             "d_model 4096), the size class of CodeLlama-7B", "code"),
    "deepseek-instruct-6.7b": _m("deepseek-coder-6.7b-instruct", CL.format("7b"), "a 6.7B Llama-architecture "
                                 "model (32 layers, d_model 4096), the size class of CodeLlama-7B", "code"),
    "magicoder-ds-7b": _m("magicoder-ds-6.7b", CL.format("7b"), "a deepseek-coder-6.7B fine-tune (Llama "
                          "architecture), the size class of CodeLlama-7B", "code"),
    "deepseek-base-33b": _m("deepseek-coder-33b", CL.format("34b"), "a 33B Llama-architecture model with 8 KV "
                            "heads, the size class of CodeLlama-34B", "code"),
    "deepseek-instruct-33b": _m("deepseek-coder-33b-instruct", CL.format("34b"), "a 33B Llama-architecture model "
                                "with 8 KV heads, the size class of CodeLlama-34B", "code"),
    "mistral-7b": _m("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", "the same 7.2B Mistral architecture "
                     "(the base model; the instruct v0.3 was measured)"),
    "mixtral-8x7b": _m("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", "the same architecture (the base "
                       "model; the instruct was measured). prefill_scale 0.276 = 12.9B active / 46.7B total",
                       prefill_scale=0.276),
}
STUDIES = {
    "zeroeval-math": dict(pool="zeroeval_math", models=ZEROEVAL_MODELS, what="ZeroEval's GSM8K and MATH level 5 "
                          "outcomes (open-weight models, 2.6B-405B)"),
    "cruxeval": dict(pool="cruxeval", models=CRUXEVAL_MODELS, what="CRUXEval's output- and input-prediction "
                     "outcomes (open-weight code models, 6.7B-46.7B, direct and chain of thought)"),
}


def _replace(text: str, old: str, new: str, where: str) -> str:
    if old not in text:
        raise SystemExit(f"{where}: expected to find {old!r}; update scripts/public_pool_studies.py")
    return text.replace(old, new)


def render(name: str) -> dict[Path, str]:
    spec = STUDIES[name]
    params = (REPLAY / "params.yaml").read_text()
    where = "studies/replay/params.yaml"
    body = _replace(params[params.index("\n\n") + 2:], "studies/replay/", f"studies/{name}/", where)  # its outputs
    params = (f"# GENERATED by scripts/public_pool_studies.py from studies/replay/params.yaml: edit that file or the "
              f"script, then rerun it.\n# Public-pool study: the replay study's stages and params on {spec['what']},\n"
              f"# energy MODELLED from ML.ENERGY. Run it with:\n"
              f"#   .venv/bin/jouleroute --params studies/{name}/params.yaml repro\n"
              f"# Every path here is relative to the repository root, where the stages run, as in params.yaml.\n\n" + body)
    params = _replace(params, "mlruns/replay", f"mlruns/{name}", where)
    params = _replace(params, "docs/replay-study.md", f"docs/{name}-study.md", where)
    params = _replace(params, "experiment: jouleroute-replay\n", f"experiment: jouleroute-{name}\n", where)
    params = _replace(params, "profile_source: replay\n", "profile_source: public_pool\n", where)
    import re

    params = re.sub(r"all [\d,]+ (train|val|test) queries", r"all \1 queries", params)
    start = params.index("\nreplay:") + 1
    end = params.index("\n", start) + 1
    section = {"public_pool": {"pool": spec["pool"], "source_dir": f"data/external/outcomes/{spec['pool']}",
                               "table": f"studies/{name}/artifacts/outcomes.parquet",  # repository-relative
                               "rule": {"kind": "pareto", "max_candidates": 8}, "models": spec["models"]}}
    text = yaml.safe_dump(section, sort_keys=False, width=110)
    params = params[:start] + "# the pool's open-weight models with an ML.ENERGY reference of the same architecture and size " \
        "class;\n# the pool rule picks the candidates on train (docs/replay.md, \"Public pools\")\n" + text + params[end:]

    dvc = (REPLAY / "dvc.yaml").read_text()
    where = "studies/replay/dvc.yaml"
    dvc = _replace(dvc[dvc.index("stages:"):], "studies/replay/", f"studies/{name}/", where)  # its params and outputs
    first_end = dvc.index("\n  validate:")
    stage = (f"stages:\n  outcomes:\n    wdir: ../..\n    cmd: jouleroute --params studies/{name}/params.yaml outcomes\n"
             "    deps:\n      - jouleroute/replay\n      - jouleroute/stages/outcomes.py\n"
             "      - jouleroute/stages/profile_record.py\n      - jouleroute/tournament/summary.py\n"
             f"      - jouleroute/benchmarks/grading.py\n      - data/external/outcomes/{spec['pool']}\n"
             "      - data/outcomes/tokenizers/smollm2-135m-instruct\n      - data/external/energy/mlenergy-v2\n"
             f"    params:\n      - studies/{name}/params.yaml:\n          - public_pool\n"
             "          - energy_policy.allow_mixed_sources\n"
             "    outs:\n      - ${paths.queries}\n      - ${paths.profile}\n"
             f"      - studies/{name}/artifacts/profile.provenance.parquet\n      - studies/{name}/artifacts/outcomes.parquet\n"
             "      - ${paths.profile_meta}\n")
    dvc = (f"# GENERATED by scripts/public_pool_studies.py from studies/replay/dvc.yaml: edit that file or the script, "
           f"then rerun it.\n# The replay study's stages on {spec['what']}.\n" + stage + dvc[first_end:])
    dvc = _replace(dvc, "docs/replay-study.md", f"docs/{name}-study.md", where)
    return {ROOT / "studies" / name / "params.yaml": params, ROOT / "studies" / name / "dvc.yaml": dvc}


def main() -> int:

    return sync_presets({p: t for name in STUDIES for p, t in render(name).items()}, "scripts/public_pool_studies.py")


if __name__ == "__main__":
    sys.exit(main())
