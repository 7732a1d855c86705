"""``jouleroute serve-model`` (the bundled OpenAI-compatible server) and ``jouleroute meter`` (an energy
exporter): the two processes a GPU node of a served pool runs when it has no ``vllm serve`` or DCGM exporter
(docs/cluster.md). Neither needs a params file, except serve-model for a packaged model's name."""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

logger = logging.getLogger(__name__)


def model_folder(name: str, ctx) -> tuple[Path, str]:
    """``(folder, served name)`` for a key of params ``models`` (packaged or local) or a transformers folder."""
    from jouleroute.models import model_location

    folder = Path(name)
    if (folder / "config.json").is_file():
        return folder, folder.name
    from jouleroute.config import ParamsError

    models = ctx.params.models if ctx is not None else {}
    if name not in models:
        raise ParamsError(f"serve-model {name}: neither a transformers folder (no config.json there) nor a key of "
                         f"params `models` ({sorted(models)})")
    spec = models[name]
    if spec.source not in ("pypi-gguf", "local"):
        raise ParamsError(f"models.{name}: source '{spec.source}' is not a local model; serve-model serves packaged "
                         "(pypi-gguf) and local models")
    location = Path(model_location(name, spec, ctx.path("models_dir")))
    if not (location / "config.json").is_file():
        hint = "run `jouleroute models` first" if spec.source == "pypi-gguf" else f"check models.{name}.path"
        raise FileNotFoundError(f"models.{name}: no transformers folder at {location} ({hint})")
    return location, name


def serve_model_command(ctx, args) -> int:
    folder, served = model_folder(args.name, ctx)  # before torch is imported: a wrong name fails at once

    import uvicorn

    from jouleroute.backends.serve import create_app
    from jouleroute.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(folder), args.device, "float32", args.threads)
    app = create_app(backend, args.served_name or served, args.max_tokens)
    print(f"serving {folder} as '{args.served_name or served}' on http://{args.host}:{args.port}/v1 "
          f"(token counts on /metrics)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def meter_command(ctx, args) -> int:
    from jouleroute.energy.meter_server import load_counter, serve_meter

    odd = [item for item in args.counter_arg if "=" not in item]
    if odd:
        print(f"jouleroute meter: --counter-arg {odd[0]!r}: write it as KEY=VALUE", file=sys.stderr)
        return 2
    try:
        counter = load_counter(args.counter, dict(item.split("=", 1) for item in args.counter_arg))
    except (ImportError, AttributeError, TypeError, ValueError) as error:  # a counter that cannot be made
        print(f"jouleroute meter: --counter {args.counter}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    server, _ = serve_meter(counter, args.host, args.port)
    print(f"jouleroute meter: {counter.source} on http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        threading.Event().wait()
    finally:
        server.shutdown()
        server.server_close()
    return 0


def add_arguments(name: str, parser) -> None:
    if name == "serve-model":
        parser.add_argument("name", help="a key of params `models` (packaged or local) or a transformers folder")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--served-name", help="the model name clients send (default: NAME or the folder's)")
        parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
        parser.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
        parser.add_argument("--max-tokens", type=int, default=256, help="when a request sets no max_tokens")
    if name == "meter":
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 on a cluster node)")
        parser.add_argument("--port", type=int, default=9400, help="port (9400: the DCGM exporter's)")
        parser.add_argument("--counter", help="MODULE:FACTORY of another counter source (default: Zeus NVML/RAPL)")
        parser.add_argument("--counter-arg", action="append", default=[], metavar="KEY=VALUE",
                            help="keyword argument for --counter's factory (repeatable)")
