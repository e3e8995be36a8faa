"""`hpdparse serve`, the command line of the server (hpdparse.serve.server); cli.py registers it.
Cheap to import: the server's own modules load when the command runs."""

from __future__ import annotations

import sys
from typing import Any

import click

from hpdparse.commands.flags import flags, values
from hpdparse.commands.options import decode_options, fail, one_line_errors
from hpdparse.engines import registry
from hpdparse.engines.options import EngineConfig
from hpdparse.errors import HpdparseError
from hpdparse.runner.settings import ConvertSettings
from hpdparse.serve import settings as serve_settings
from hpdparse.serve.settings import ServeSettings, api_keys_from


@click.command()
@flags(EngineConfig, "model", model="Model to serve: a hub id or a local folder.")
@click.option(
    "--engine",
    type=click.Choice(registry.LIVE_ENGINE_NAMES),
    default=registry.DEFAULT_ENGINE,
    show_default=True,
    help="In-process engine that decodes the pages.",
)
@click.option(
    "--host",
    default=serve_settings.DEFAULT_HOST,
    show_default=True,
    help="Address to listen on: an IPv4 or IPv6 address (:: for every interface) or a name.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=serve_settings.DEFAULT_PORT,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@click.option(
    "--uds",
    type=click.Path(dir_okay=False),
    help="Listen on this Unix socket instead of --host/--port.",
)
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="Key clients must send as 'Authorization: Bearer KEY' (repeatable; default: the "
    f"{serve_settings.API_KEY_ENV} variable; none: no key needed). /health and /metrics "
    "stay open.",
)
@click.option(
    "--served-model-name",
    help="Model name clients send and GET /v1/models lists. Default: --model as given.",
)
@flags(
    ConvertSettings, "batch_size", batch_size="Pages decoded at once (in flight), across requests."
)
@click.option(
    "--max-queued",
    type=click.IntRange(1, None),
    default=serve_settings.DEFAULT_MAX_QUEUED,
    show_default=True,
    help="Pages held in memory (read, decoded, tiled, queued) before the engine takes them; "
    "further requests wait.",
)
@click.option(
    "--max-waiting",
    type=click.IntRange(1, None),
    default=serve_settings.DEFAULT_MAX_WAITING,
    show_default=True,
    help="Requests that may wait for room (see --max-queued); one more gets HTTP 503 at once.",
)
@click.option(
    "--max-request-mb",
    type=click.FloatRange(0.01, None),
    default=serve_settings.DEFAULT_MAX_REQUEST_MB,
    show_default=True,
    help="Largest request body in MB; a larger one gets HTTP 413 before it is read.",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(0, None),
    default=serve_settings.DEFAULT_SHUTDOWN_TIMEOUT,
    show_default=True,
    help="Seconds a stop (SIGTERM, Ctrl-C) lets accepted pages finish; the rest get HTTP 503.",
)
@decode_options
@click.option("-v", "--verbose", is_flag=True, help="Log every request.")
def serve_command(**kw: Any) -> None:
    """Serve HPD parsing as an OpenAI-compatible API, for clients such as `hpdparse convert
    --engine openai --server URL` or the official openai client.

    \b
    POST /v1/chat/completions: one page per request, a user message with the page as a PNG or
      JPEG data URL (and optionally the HPD instruction); the answer's content is the page's
      raw HPD text. stream: true sends it as server-sent events while the page decodes.
      Decoding is greedy (temperature must be 0 or left out); a request's max_tokens applies
      up to --max-tokens.
    GET /v1/models, GET /health (200 when the engine is up, 503 while it starts or the server
      stops), GET /metrics (Prometheus).
    Prints "serving MODEL on URL" when ready; runs until Ctrl-C or SIGTERM (see
    --shutdown-timeout).
    """
    import logging

    try:
        from hpdparse.serve.server import HpdServer
        from hpdparse.serve.server import serve as run_server
    except ImportError as exc:
        fail(
            HpdparseError(
                f"hpdparse serve needs starlette, uvicorn and prometheus_client ({exc}); "
                "install them with: pip install 'hpdparse[serve]'"
            ),
            kw["verbose"],
        )
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if kw["verbose"]:
        logging.getLogger("hpdparse.serve").setLevel(logging.DEBUG)
    settings = ServeSettings(
        host=kw["host"],
        port=kw["port"],
        uds=kw["uds"],
        served_model_name=kw["served_model_name"],
        api_keys=api_keys_from(kw["api_keys"]),
        batch_size=kw["batch_size"],
        max_queued=kw["max_queued"],
        max_waiting=kw["max_waiting"],
        max_request_bytes=int(kw["max_request_mb"] * 2**20),
        shutdown_timeout=kw["shutdown_timeout"],
    )
    config = EngineConfig(**values(EngineConfig, kw))
    server = HpdServer(kw["engine"], config, settings, options=kw["engine_options"])
    with one_line_errors(kw["verbose"]):
        code = run_server(server, lambda line: click.echo(line))
    sys.exit(code)
