"""A study page's training cost line (stages/study_page.py): a run resumed from a finished checkpoint says so,
instead of reading as steps trained in 0 s."""

from jouleroute.stages.study_page import _spent


def test_a_resumed_run_names_its_checkpoint_and_a_fresh_one_only_its_time():
    assert _spent({"train_s": 44.2}) == "in 44 s"
    resumed = _spent({"train_s": 0.0, "resumed_from": "/x/artifacts/sft/checkpoints/checkpoint-110"})
    assert resumed == "in 0 s (resumed from `checkpoint-110`, whose steps ran earlier)"
