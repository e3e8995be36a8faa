"""`hpdparse serve`: the server's lifecycle, from binding its socket to draining at a signal.

Threads: the main thread waits for SIGINT/SIGTERM; uvicorn runs the HTTP app (app.py) on an event
loop in its own thread; the engine thread (queue.EngineLoop) owns the engine; a small thread pool
decodes and prepares page images. Start: bind the socket (TCP on IPv4 or IPv6, or a Unix
socket; a taken address fails at once), serve HTTP (``/health`` answers 503 while the engine
loads), start the engine, then announce ``serving MODEL on URL``. Stop: ``/health`` and new pages
get 503; pages already queued or decoding get `shutdown_timeout` seconds to finish; the rest are
dropped from the engine and answered 503; the engine closes; uvicorn lets the answers out and
closes the connections.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from starlette.routing import BaseRoute

from hpdparse.engines.base import EngineConfig
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import create_engine, get_entry
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.serve.app import Service, State, build_app
from hpdparse.serve.documents.routes import document_routes
from hpdparse.serve.documents.runner import DocumentRunner
from hpdparse.serve.documents.store import DocumentStore
from hpdparse.serve.pages import PagePolicy, describe
from hpdparse.serve.queue import SHUTTING_DOWN, EngineLoop
from hpdparse.serve.settings import ServeSettings

log = logging.getLogger(__name__)

_GRACE_SECONDS = 10.0  # how long uvicorn waits for answers being written when it stops


class HpdServer:
    """One `hpdparse serve`: socket, HTTP thread, engine thread (see the module doc)."""

    def __init__(
        self,
        engine_name: str,
        config: EngineConfig,
        settings: ServeSettings,
        options: EngineOptions | Mapping[str, Any] | None = None,
    ) -> None:
        self.engine_name = engine_name
        self.config = config
        self.settings = settings
        self.options = options  # the engine's own (--engine-option), checked in start()
        self.model_name = settings.served_model_name or config.model
        self._socket: socket.socket | None = None
        self._uvicorn: object | None = None
        self._http_thread: threading.Thread | None = None
        self.service: Service | None = None
        self._stopped = threading.Event()

    # ------------------------------------------------------------------------- addresses
    @property
    def address(self) -> str:
        """Where the server listens, as the announcement says it: its base URL (a Unix
        socket: ``http://localhost/v1`` over it)."""
        if self.settings.uds:
            return f"unix:{self.settings.uds} (http://localhost/v1)"
        host = self.settings.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.settings.port}/v1"

    def _bind(self) -> socket.socket:
        """The listening socket: TCP on --host/--port (port 0: the one picked is kept), or the
        Unix socket --uds, whose stale file (no one listening) is replaced."""
        uds, host, port = self.settings.uds, self.settings.host, self.settings.port
        if uds:
            _remove_stale_socket(uds)
        family = socket.AF_UNIX if uds else socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)  # only IPv6 addresses have colons
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(uds or (host, port))
        except OSError as exc:
            sock.close()
            reason = exc.strerror or describe(exc)
            raise HpdparseError(f"cannot listen on {uds or f'{host}:{port}'}: {reason}") from None
        if not uds:
            self.settings.port = sock.getsockname()[1]
        return sock

    # ------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Bind, serve HTTP, start the engine and wait until it is up. Raise HpdparseError
        with a one-line message when the address is taken or the engine cannot start."""
        if not get_entry(self.engine_name).live_source:
            raise EngineError(
                f"--engine {self.engine_name} cannot serve: it does not take pages as they arrive"
            )
        engine = create_engine(self.engine_name, self.config, self.options)
        store = DocumentStore(Path(self.settings.store))
        self._socket = self._bind()
        loop = EngineLoop(engine, self.settings.batch_size)
        pool = ThreadPoolExecutor(min(8, os.cpu_count() or 1), "hpdparse-prepare")
        self.service = service = Service(
            settings=self.settings,
            policy=PagePolicy(self.model_name, self.config.fork, self.config.max_tokens),
            engine=loop,
            documents=DocumentRunner(store, loop, self.settings),
            prepare_pool=pool,
            root_model=self.config.model,
        )
        self._start_http(service, document_routes(service))
        loop.start()
        loop.ready.wait()
        error = loop.error
        if error is not None:
            self._stop_http()
            if isinstance(error, HpdparseError):
                raise error
            raise HpdparseError(f"cannot start the {self.engine_name} engine: {describe(error)}")
        service.documents.start()
        service.state = State.READY
        threading.Thread(target=self._expire, args=(store,), daemon=True).start()

    def _expire(self, store: DocumentStore) -> None:
        """Remove finished documents older than --keep-results, every minute or so."""
        every = min(60.0, max(1.0, self.settings.keep_results / 10))
        while not self._stopped.wait(every):
            try:
                store.expire(self.settings.keep_results)
            except OSError as exc:  # a busy disk must not end the loop
                log.warning("removing expired documents: %s", exc)

    def _start_http(self, service: Service, routes: list[BaseRoute]) -> None:
        import uvicorn

        verbose = logging.getLogger("hpdparse.serve").isEnabledFor(logging.DEBUG)
        logging.getLogger("uvicorn.error").setLevel(logging.INFO if verbose else logging.WARNING)
        config = uvicorn.Config(
            build_app(service, routes),
            lifespan="off",
            log_config=None,
            access_log=verbose,
            timeout_graceful_shutdown=int(_GRACE_SECONDS),
            server_header=False,
        )
        self._uvicorn = server = uvicorn.Server(config)
        self._http_thread = threading.Thread(
            target=server.run, args=([self._socket],), name="hpdparse-http", daemon=True
        )
        self._http_thread.start()
        began = time.monotonic()
        while not server.started and self._http_thread.is_alive():
            if time.monotonic() - began > 30:
                raise HpdparseError("the HTTP server did not start within 30 s")
            time.sleep(0.01)

    def alive(self) -> bool:
        service = self.service
        http = self._http_thread is not None and self._http_thread.is_alive()
        return http and service is not None and service.engine.alive()

    def stop(self) -> None:
        """Drain (see the module doc) and close everything. Idempotent."""
        service = self.service
        if service is None:  # start() failed before there was anything but the socket
            self._stop_http()
            return
        began = time.perf_counter()
        service.state = State.DRAINING
        self._stopped.set()
        service.documents.stop(self.settings.shutdown_timeout)
        log.debug("stop: documents saved after %.2f s", time.perf_counter() - began)
        deadline = time.monotonic() + self.settings.shutdown_timeout
        engine = service.engine
        while engine.open_tickets and time.monotonic() < deadline and engine.alive():
            time.sleep(0.05)
        engine.stop()
        log.debug("stop: engine stopped after %.2f s", time.perf_counter() - began)
        engine.fail_all(503, SHUTTING_DOWN)
        self._stop_http()
        service.prepare_pool.shutdown(wait=False, cancel_futures=True)
        log.debug("stop: done after %.2f s", time.perf_counter() - began)

    def _stop_http(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True  # type: ignore[attr-defined]
        if self._http_thread is not None:
            self._http_thread.join()
            self._http_thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self.settings.uds:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.settings.uds)


def _remove_stale_socket(path: str) -> None:
    """Remove the Unix socket file at `path` when no one listens there (left behind by a server
    that is gone); HpdparseError when someone does, or it is no socket."""
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise HpdparseError(f"cannot listen on {path}: it exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)
            else:
                raise HpdparseError(f"cannot listen on {path}: another server is listening there")


def serve(server: HpdServer, announce: Callable[[str], None]) -> int:
    """Start `server`, announce ``serving MODEL on URL``, serve until SIGINT/SIGTERM or an engine
    failure, stop. Returns the exit code (0 after a signal); raises after an engine failure."""
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in signals}
    try:
        try:
            server.start()
            announce(f"serving {server.model_name} on {server.address}")
            while not stop.wait(0.5) and server.alive():
                pass
        finally:
            server.stop()
        log.debug("stopped")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    error = server.service.engine.error if server.service is not None else None
    if error is not None:
        raise HpdparseError(f"the engine failed: {describe(error, 300)}")
    return 0
