"""``jouleroute serve``: the energy-aware OpenAI-compatible gateway (docs/gateway.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import yaml

from jouleroute.config import ParamsError, did_you_mean, problem_line
from jouleroute.strict import yaml_only_value
from jouleroute.strict import STRICT_CONTEXT
from jouleroute.stages.context import StageContext

logger = logging.getLogger(__name__)


def load_gateway_config(ctx: StageContext, config: str | None):
    """The params' ``gateway`` section, or the one in ``--config FILE`` (a mapping of gateway keys)."""
    from pydantic import ValidationError

    from jouleroute.gateway.config import GatewayConfig

    if config is None:
        return ctx.params.gateway
    path = Path(config)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        section = raw.get("gateway", raw) if isinstance(raw, dict) else raw
        unquoted = yaml_only_value(section, ("gateway",))  # an unquoted 2024-01-01 is a date, never text silently
        if unquoted:
            raise ParamsError(f"{path}: not a valid gateway config: {unquoted}")
        # as strict as the params file (config.load_params): `port: "8080"` is no int
        return GatewayConfig.model_validate_json(json.dumps(section), strict=True, context=STRICT_CONTEXT)
    except FileNotFoundError:
        raise ParamsError(f"{path}: not found") from None
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML: {getattr(error, 'problem', None) or error}") from None
    except ValidationError as error:  # one line: each problem as check-params names it, under gateway.
        located = [{**e, "loc": ("gateway", *e["loc"])} for e in error.errors()]
        problems = [f"{'.'.join(map(str, e['loc']))}: unknown key{did_you_mean(e['loc'])}"
                    if e["type"] == "extra_forbidden" else problem_line(e) for e in located]
        raise ParamsError(f"{path}: not a valid gateway config: {'; '.join(problems)}") from None


def with_address(cfg, host: str | None, port: int | None):
    """``cfg`` with the command line's --host/--port. Only what was set is carried over, so that a config
    without ``router`` still serves the champion (gateway/build.py) after the address changes."""
    update = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    return cfg.model_validate(cfg.model_dump(exclude_unset=True) | update) if update else cfg


def with_target(params, share: float | None, accuracy: float | None):
    """``params`` with the command line's --target-energy-share / --target-accuracy as ``router.target``."""
    if share is None and accuracy is None:
        return params
    from pydantic import ValidationError

    from jouleroute.policy.target import Target

    try:
        target = Target(energy_share=share, accuracy_floor=accuracy)
    except ValidationError as error:
        raise ParamsError(f"--target-energy-share/--target-accuracy: {error.errors()[0]['msg']}") from None
    return params.model_copy(update={"router": params.router.model_copy(update={"target": target})})


def serve_command(ctx: StageContext, args) -> None:
    import uvicorn

    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.build import build_gateway

    cfg = with_address(load_gateway_config(ctx, getattr(args, "config", None)), getattr(args, "host", None),
                       getattr(args, "port", None))
    share, accuracy = getattr(args, "target_energy_share", None), getattr(args, "target_accuracy", None)
    params, asked = with_target(ctx.params, share, accuracy), share is not None or accuracy is not None
    try:  # the deployed policy, whatever its kind; a router at the λ meeting a --target-*; or gateway.router's
        gateway = build_gateway(params, ctx.root, cfg, target_asked=asked)
    except (ValueError, FileNotFoundError) as error:
        raise ParamsError(str(error)) from None
    logger.info("serving %s on http://%s:%d/v1 (router %s)", gateway.models, cfg.host, cfg.port,
                gateway.policy or "none")
    # Keep-alive outlasts clients' and load balancers' usual 5 s idle timeout, so the client closes
    # first and no request goes down a connection the gateway is closing. On SIGTERM, in-flight
    # requests get 30 s to finish.
    from jouleroute.gateway.router_build import champion_dir
    from jouleroute.gateway.reload import LiveGateway

    live = LiveGateway(gateway, rebuild=lambda old: build_gateway(params, ctx.root, cfg, reuse=old, target_asked=asked),
                       watch=champion_dir(params, ctx.root) / "champion.json", poll_s=cfg.reload_poll_s)
    uvicorn.run(create_app(live), host=cfg.host, port=cfg.port, log_level="warning", access_log=False,
                timeout_keep_alive=30, timeout_graceful_shutdown=30)
