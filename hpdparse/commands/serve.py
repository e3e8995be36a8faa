"""`hpdparse serve`, the command line of the server (hpdparse.serve.server); cli.py registers it.
Cheap to import: the server's own modules load when the command runs."""

from __future__ import annotations

import sys
from typing import Any

import click

from hpdparse.commands.flags import flagged, flags, values
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
@flags(ServeSettings, "host", "port", "uds")
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="Key clients must send as 'Authorization: Bearer KEY' (repeatable; default: the "
    f"{serve_settings.API_KEY_ENV} variable; none: no key needed). With several keys each "
    "sees only the documents it uploaded. /health, /metrics, / and /openapi.json stay open.",
)
@flags(ServeSettings, "served_model_name")
@flags(
    ConvertSettings,
    "batch_size",
    "workers",
    batch_size="Pages decoded at once (in flight), across requests and documents.",
    workers="Processes rasterizing the documents' pages. Default: one per CPU core (max 8).",
)
# the service's other options, as ServeSettings declares them
@flags(ServeSettings, *flagged(ServeSettings, "host", "port", "uds", "served_model_name"))
@decode_options
@click.option("-v", "--verbose", is_flag=True, help="Log every request.")
def serve_command(**kw: Any) -> None:
    """Serve HPD parsing: whole documents converted as `hpdparse convert` converts them, and
    an OpenAI-compatible API for single pages (clients such as `hpdparse convert --engine
    openai --server URL` or the official openai client). Open http://HOST:PORT/ for the web
    page.

    \b
    POST /v1/documents: upload files (multipart, field "file", repeatable) with conversion
      options as fields (pages, password, text_layer, docling, chunks, table_format, math,
      keep_headers...); answers 202 with each document's id. GET /v1/documents/ID for its
      status, /events for its progress, /result?format=markdown|json|docling|chunks|zip|html
      for its files, /review for its review page; DELETE cancels or deletes it. POST
      /v1/convert waits for one document. Kept under --store: a server started again on it
      finishes what was accepted. GET /openapi.json describes these routes.
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
    api_keys = api_keys_from(kw.pop("api_keys"))
    settings = ServeSettings(api_keys=api_keys, **values(ServeSettings, kw))
    config = EngineConfig(**values(EngineConfig, kw))
    server = HpdServer(kw["engine"], config, settings, options=kw["engine_options"])
    with one_line_errors(kw["verbose"]):
        code = run_server(server, lambda line: click.echo(line))
    sys.exit(code)
