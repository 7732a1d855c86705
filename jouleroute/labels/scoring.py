"""What the test split is scored on: gold where the queries carry it, else the labels (and the report says which).

Selection (train, val) always reads the labels: a policy is chosen as a user without gold would choose it. The
test split scores the choice once; where every test pair of the tournament's profile was graded against gold,
it is scored on gold, whatever trained it, so a label-trained policy's accuracy is the real one.
"""

from __future__ import annotations

import pandas as pd

GOLD_SCORED, LABEL_SCORED = "gold", "labels"


def scoring_profile(labelled: pd.DataFrame, graded: pd.DataFrame, test_split: str = "test"
                    ) -> tuple[pd.DataFrame, str]:
    """The profile to score with (``labelled``'s selection rows, the test rows from ``graded`` when they all
    carry gold) and what its test rows are scored on (``"gold"`` or ``"labels"``)."""
    test = graded[graded["split"] == test_split]
    if test.empty or test["correct"].isna().any():
        return labelled, LABEL_SCORED
    selection = labelled[labelled["split"] != test_split]
    gold_test = test.assign(label_source="gold") if "label_source" in labelled.columns else test
    merged = pd.concat([selection, gold_test[selection.columns.intersection(gold_test.columns)]], ignore_index=True)
    return merged, GOLD_SCORED
