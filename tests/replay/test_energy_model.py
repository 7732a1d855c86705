"""The token x energy arithmetic, the choice of reference configuration, and mapping errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from jouleroute.replay.config import EnergyMapping, EnergyModelConfig, ReplayConfig, ReplayModel
from jouleroute.replay.energy_model import build_token_model, find_reference


def _energy(fake_ref, **kw) -> EnergyModelConfig:
    return EnergyModelConfig(reference_dir=str(fake_ref.root), gpu=fake_ref.gpu, **kw)


def test_request_energy_and_latency_by_hand(fake_ref, repo_root: Path) -> None:
    # Target 100 is closer to bs64 than bs192: J_out = 100 J / 50 tok = 2 J; s = 0.25 -> J_in = 0.5 J;
    # prefill speed = 1000 tok/s / 0.25 = 4000 tok/s.
    cfg = _energy(fake_ref, target_batch_size=100, prefill_share=0.25)
    model = build_token_model(EnergyMapping(reference=fake_ref.model, reason="test"), cfg, repo_root, "k")
    assert (model.j_per_output_token, model.j_per_input_token, model.batch_size) == (2.0, 0.5, 64)
    out = model.requests(np.array([8, 0]), np.array([4, 3]))
    # 8 prompt + 4 output tokens: 8*0.5 + 4*2 = 12 J; ttft 8/4000 = 0.002 s; latency 0.002 + 4*0.05 = 0.202 s.
    np.testing.assert_allclose(out["energy_j"], [12.0, 6.0])
    np.testing.assert_allclose(out["ttft_s"], [0.002, 0.0])
    np.testing.assert_allclose(out["latency_s"], [0.202, 0.15])


def test_user_supplied_figures_use_the_same_formulas(fake_ref, repo_root: Path) -> None:
    mapping = EnergyMapping(j_per_output_token=3.0, tpot_s=0.1, prefill_tokens_per_s=500.0, reason="vendor figure")
    model = build_token_model(mapping, _energy(fake_ref, prefill_share=0.1), repo_root, "replay.closed_models.x")
    out = model.requests(np.array([10]), np.array([2]))
    np.testing.assert_allclose(out["energy_j"], [10 * 0.3 + 2 * 3.0])
    np.testing.assert_allclose(out["latency_s"], [10 / 500 + 2 * 0.1])
    assert model.reference_file == "params:replay.closed_models.x"


def test_prefill_scale_multiplies_the_share_and_is_bounded(fake_ref, repo_root: Path) -> None:
    cfg = _energy(fake_ref, target_batch_size=64, prefill_share=0.5)
    moe = EnergyMapping(reference=fake_ref.model, prefill_scale=0.5, reason="active/total parameters")
    model = build_token_model(moe, cfg, repo_root, "k")
    assert model.j_per_input_token == pytest.approx(0.25 * 2.0) and model.prefill_tokens_per_s == pytest.approx(4000.0)
    with pytest.raises(ValueError, match=r"models.big: prefill_share x prefill_scale = 1.5 > 1"):
        build_token_model(moe.model_copy(update={"prefill_scale": 3.0}), cfg, repo_root, "models.big")


def test_closest_batch_size_ties_go_to_the_smaller_and_fewest_gpus(fake_ref) -> None:
    fake_ref.write(fake_ref.root, fake_ref.model, bs=64, tp=2, energy_req_j=90.0, avg_out=50.0, tpot_s=0.04, tput=900.0)
    tie = find_reference(fake_ref.root, fake_ref.model, "chat", fake_ref.gpu, 128)  # 64 and 192 are equidistant
    assert (tie.batch_size, tie.tensor_parallel) == (64, 1)
    assert find_reference(fake_ref.root, fake_ref.model, "chat", fake_ref.gpu, 150).batch_size == 192


def test_a_mapping_miss_is_an_error_naming_the_model(fake_ref, repo_root: Path) -> None:
    missing = EnergyMapping(reference="org/missing-70b", reason="a model we have no measurement of")
    with pytest.raises(ValueError, match=r"org/missing-70b.*measured models there: \['org/fake-7b'\]"):
        build_token_model(missing, _energy(fake_ref), repo_root, "k")
    with pytest.raises(ValueError, match="GPU 'B200'.*GPUs there"):
        find_reference(fake_ref.root, fake_ref.model, "chat", "B200", 128)


def test_a_reference_missing_a_field_names_file_and_field(fake_ref, tmp_path: Path) -> None:
    path = fake_ref.write(tmp_path, fake_ref.model, bs=8, tp=1, energy_req_j=0.0, avg_out=5.0, tpot_s=0.1, tput=10.0)
    with pytest.raises(ValueError, match=r"bs8\+tp1\+pp1.json: field 'Energy/req \(J\)' must be a positive number"):
        find_reference(tmp_path, fake_ref.model, "chat", fake_ref.gpu, 8)
    assert path.exists()


def test_mapping_needs_a_reason_and_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="reason"):
        EnergyMapping(reference="a/b")
    with pytest.raises(ValidationError, match="not both"):
        EnergyMapping(reference="a/b", j_per_output_token=1.0, reason="why")
    with pytest.raises(ValidationError, match="all of j_per_output_token"):
        EnergyMapping(j_per_output_token=1.0, reason="why")


def test_replay_config_is_strict() -> None:
    with pytest.raises(ValidationError, match="extra"):
        ReplayConfig(val_fraktion=0.2)
    with pytest.raises(ValidationError, match="closed models have no ML.ENERGY reference"):
        ReplayConfig(closed_models={"gpt-4": ReplayModel(candidate_id="gpt-4", reference="a/b", reason="why")})
    twin = ReplayModel(candidate_id="mistral-7b-chat", reference="a/b", reason="why")
    with pytest.raises(ValidationError, match="candidate_id used by more than one model"):
        ReplayConfig(models={**ReplayConfig().models, "other/model": twin})


def test_default_mapping_resolves_to_shipped_h100_measurements(repo_root: Path) -> None:
    cfg = ReplayConfig()
    for name, entry in cfg.models.items():
        model = build_token_model(entry, cfg.energy, repo_root, name)
        assert model.batch_size == cfg.energy.target_batch_size
        assert model.reference_file.startswith("data/external/energy/mlenergy-v2/") and cfg.energy.gpu in model.reference_file
        share = cfg.energy.prefill_share * entry.prefill_scale
        assert model.j_per_input_token == pytest.approx(share * model.j_per_output_token)
