"""`jouleroute import`: a user's own outcome table (CSV, JSONL or parquet) as the profile.

Not a stage of any dvc.yaml here: a user calls it from a pipeline of their own (docs/replay.md), with an
`import_outcomes:` section in the params file. It writes what the `replay` stage writes.
"""

from __future__ import annotations

import argparse

from jouleroute.replay import run_import
from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.stages.profile_record import finish_profile


def import_command(ctx: StageContext, args: argparse.Namespace | None = None) -> dict | int:
    if args is not None and getattr(args, "init", None) and getattr(args, "prompts", None):
        from jouleroute.commands.pool_init import init_pool, pipeline_folder
        from jouleroute.commands.prompts_init import render

        files = render(pipeline_folder(ctx.root, args.init), args.prompts, args.reference, ctx.root)
        written = init_pool(ctx.root, args.init, None, files)
        folder = written[0].parent.relative_to(ctx.root)
        print(f"wrote {', '.join(str(p.relative_to(ctx.root)) for p in written)}: set pool: and models: to your "
              f"candidates, then `jouleroute --params {folder}/params.yaml repro`; docs/your-own-pool.md")
        return 0
    if args is not None and getattr(args, "reference", None):
        raise StageFailed("--reference labels a prompts pipeline: give it with --init DIR --prompts FILE")
    if args is not None and getattr(args, "init", None):
        from jouleroute.commands.pool_init import init_pool

        written = init_pool(ctx.root, args.init, getattr(args, "table", None))
        folder = written[0].parent.relative_to(ctx.root)
        print(f"wrote {', '.join(str(p.relative_to(ctx.root)) for p in written)}: set import_outcomes.input_file "
              f"(and models: for rows without energy_j), then `jouleroute --params {folder}/params.yaml repro`; "
              "docs/your-own-pool.md")
        return 0
    if ctx.params.import_outcomes is None:
        raise StageFailed(f"{ctx.params_path.name} has no `import_outcomes:` section (see docs/replay.md)")
    ctx.check_outputs("replay")  # a params copy never writes a pipeline's tracked query table or profile
    result = run_import(ctx.params.import_outcomes, ctx.root, ctx.path("queries"), ctx.path("profile"),
                        allow_mixed_sources=ctx.params.energy_policy.allow_mixed_sources)
    finish_profile(ctx, "import", result, ctx.params.import_outcomes.model_dump(mode="json"))
    return result
