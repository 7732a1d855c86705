"""Stage `outcomes`: a public outcome pool of the data root as a profile (modelled energy).

Reads `public_pool:`; the pool's reader (its module in jouleroute/replay/pools/) turns its files into the table
`jouleroute import` reads (written to public_pool.table, so a user can import it by hand too), which is imported
with the same code; the candidates are then the models the pool rule picks on train (the accuracy-energy
front). Every public pool's study (studies/<study>/) starts with it.
"""

from __future__ import annotations

import logging

import pandas as pd

from jouleroute.atomic import atomic_write_table
from jouleroute.replay import run_import
from jouleroute.replay.config import EnergyMapping, ImportConfig
from jouleroute.replay.pool_rule import choose_candidates
from jouleroute.replay.pools import get_pool
from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.stages.profile_record import finish_profile

log = logging.getLogger(__name__)


def outcomes_stage(ctx: StageContext) -> dict:
    cfg = ctx.params.public_pool
    if cfg is None:
        raise StageFailed(f"{ctx.params_path.name} has no `public_pool:` section (docs/replay.md, \"Public pools\")")
    built = get_pool(cfg.pool).read(cfg, ctx.root)
    mappings = {m.candidate_id: EnergyMapping(**m.model_dump(exclude={"candidate_id"})) for m in cfg.models.values()}
    import_cfg = ImportConfig(input_file=cfg.table, source_name=cfg.pool.replace("_", "-"), energy=cfg.energy,
                              models=mappings)

    def imported(table: pd.DataFrame) -> dict:
        import pyarrow as pa

        atomic_write_table(pa.Table.from_pandas(table, preserve_index=False), ctx.root / cfg.table)
        return run_import(import_cfg, ctx.root, ctx.path("queries"), ctx.path("profile"),
                          allow_mixed_sources=ctx.params.energy_policy.allow_mixed_sources)

    result = imported(built.table)
    chosen, points = choose_candidates(pd.read_parquet(ctx.path("profile")), cfg.rule)
    if len(chosen) < built.table["candidate"].nunique():
        result = imported(built.table[built.table["candidate"].isin(chosen)].reset_index(drop=True))
    log.info("pool rule %s: %d of %d models become candidates: %s", cfg.rule.kind, len(chosen), len(points), chosen)
    result |= {"pool": cfg.pool, "pool_rule": cfg.rule.model_dump(), "candidates_chosen": chosen,
               "train_points": points.round(4).reset_index().to_dict(orient="records"), "notes": built.notes}
    finish_profile(ctx, "outcomes", result, cfg.model_dump(mode="json"))
    return result
