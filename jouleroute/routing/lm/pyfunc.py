"""The LM router as an MLflow pyfunc model, so the registered router can be loaded and served.

``predict(frame)`` takes query rows (``query_id``, ``question``, ``task`` and an optional
``lam`` column, one λ per row) and returns the chosen candidate ids.
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc
import pandas as pd


class LMRouterPyfunc(mlflow.pyfunc.PythonModel):
    """Wraps :class:`jouleroute.routing.lm.router.LMRouter` over the logged router folder."""

    def load_context(self, context: Any) -> None:
        from jouleroute.routing.lm.router import LMRouter

        self.router = LMRouter(context.artifacts["router"])

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict | None = None) -> list[str]:
        frame = model_input.reset_index(drop=True)
        if "lam" not in frame.columns:
            return self.router.route(frame).candidate_ids
        chosen: list[str] = [""] * len(frame)
        for lam, group in frame.groupby("lam", sort=False):
            for position, cid in zip(group.index, self.router.route(group, lam=float(lam)).candidate_ids):
                chosen[position] = cid
        return chosen
