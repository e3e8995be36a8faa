"""`PageDecoder`: the stateful class Ray Data runs as the `map_batches` actors of a `--ray` run.

Each actor holds one started engine (one GPU, or its share of CPUs) and its own rasterizer
processes (`EngineFeed`). A call gets a batch of work units and returns one `PageRow` per page:
pages already saved by an earlier attempt are not decoded again, the others are rasterized,
decoded and their raw records saved through the store (atomic writes, so a retried unit only
rewrites identical files). A page that fails is a failed row, never an exception: only a dead
engine ends the actor (`engine_feed.die`), so that Ray restarts it and retries the unit.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpdparse.engines.base import DecodeKey, Engine, PageResult
from hpdparse.engines.registry import ENGINES, dependency_error
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.remote import is_url
from hpdparse.runner.ray.engine_feed import EngineFeed
from hpdparse.runner.ray.run_book import Heartbeat, run_is_over
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import (
    PAGE_DECODED,
    PAGE_FAILED,
    PAGE_GIVEN_UP,
    PAGE_NO_ENGINE,
    PAGE_SAVED,
    PageRow,
    Scalar,
    WorkUnit,
    columns,
    rows_of,
)
from hpdparse.runner.read_ahead import ReadAhead
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.raw_pages import RawPage

SHARED_FS_HINT = "--ray needs inputs and output on a file system every node sees"

ACTOR_RUNTIME_ENV = {"env_vars": {"RAY_kill_child_processes_on_worker_exit": "false"}}
"""The engine actors' runtime environment. An exiting Ray worker SIGKILLs its direct child
processes before it calls `__ray_shutdown__` (`PageDecoder.__del__`), so it killed the rasterizer
pool's forkserver and multiprocessing's resource tracker while the pool was still open; closing
the pool then relaunched the tracker, which printed a `KeyError` traceback for each semaphore it
was told to forget. The actor ends its own processes (`__del__`), and each of them also ends by
itself when the actor process dies (the tracker and the forkserver on their pipe's end of file,
the rasterizers by `workers._exit_when_orphaned`, a vLLM engine runs in the actor's process)."""


class PageDecoder:
    """A `map_batches` callable class: one engine per actor, work units in, page rows out."""

    def __init__(
        self,
        make_engine: Callable[[], Engine],
        settings: ConvertSettings,
        ray_settings: RaySettings,
        reuse_key: DecodeKey,
        driver_cwd: str,
        run_book: Any = None,
    ) -> None:
        # Relative paths the user gave (a model folder) mean on every node what they mean on
        # the driver, the file system being shared.
        if os.path.isdir(driver_cwd):
            os.chdir(driver_cwd)
        import ray

        context = ray.get_runtime_context()
        self.actor = context.get_actor_id() or ""
        with warnings.catch_warnings():  # Ray 2.60 warns of its own use of `actor_id` here
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarted = bool(context.was_current_actor_reconstructed)
        self.host = socket.gethostname()
        self.node = f"{self.host}:{(context.get_node_id() or '')[:8]}"
        self.pid = os.getpid()
        self.settings = settings
        self.attempts = ray_settings.unit_attempts
        self.book = run_book
        self._ray = ray
        if run_book is not None and run_is_over(ray, run_book):
            ray.actor.exit_actor()  # started after its run ended: not restarted, nothing left
        self.start_error: str | None = None
        try:
            self.engine = make_engine()
            try:
                self.engine.start()
            except ImportError as exc:
                raise dependency_error(self.engine.name, exc) from None
            self.info = self.engine.info
            if self.info.reuse_key() != reuse_key:
                raise EngineError(
                    f"it resolves the model to {self.info.reuse_key().to_json()}, the driver to "
                    f"{reuse_key.to_json()}: install the same checkpoint on every node"
                )
        except HpdparseError as exc:
            # Not raised: Ray Data would retry the constructor again and again, printing the
            # actor's tracebacks, and would not end an actor still in its constructor when the
            # driver ends the run. Each call answers PAGE_NO_ENGINE rows; the driver ends it.
            self.start_error = f"an engine actor could not start on {self.host}: {exc}"
            return
        workers = settings.worker_count(ray_settings.cpus_per_actor)
        self.pool = WorkerPool(workers, self.engine.preparer())
        self.feed = EngineFeed(
            self.engine,
            ReadAhead(self.pool, settings),
            live=ENGINES[self.engine.name].live_source,
            batch_size=settings.batch_size,
            hang_seconds=ray_settings.hang_seconds,
        )
        # Alive from now on: the engine is started and the actor takes units.
        self.heartbeat = Heartbeat(run_book, self.actor, self.pid) if run_book else None

    def __del__(self) -> None:
        # Ray Data drops the actor when the run is done (Ray calls this before the process
        # exits): the rasterizer processes and the engine are ended cleanly, not killed (see
        # ACTOR_RUNTIME_ENV).
        heartbeat = getattr(self, "heartbeat", None)
        if heartbeat is not None:
            heartbeat.stop()
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(cancel=True)
        engine = getattr(self, "engine", None)
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.close()
        gc.collect()

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[Scalar]]:
        units = [WorkUnit.from_row(unit_row) for unit_row in rows_of(batch)]
        return columns(row.to_row() for unit in units for row in self.decode_unit(unit))

    def decode_unit(self, unit: WorkUnit) -> list[PageRow]:
        """Every page of `unit`, decoded now, found saved, or failed (all of them when the
        engine could not start, or the unit's files cannot be reached from here)."""
        started = time.time()
        if self.start_error is not None:
            error = self.start_error
            return [self._row(unit, started, n, PAGE_NO_ENGINE, error=error) for n in unit.pages]
        problem = self._unreachable(unit)
        if problem is not None:
            return [self._row(unit, started, n, PAGE_FAILED, error=problem) for n in unit.pages]
        folder = open_document_folder(unit.folder)
        attempt = self._ray.get(self.book.begin.remote(unit.unit)) if self.book else 1
        rows: list[PageRow] = []
        to_decode: list[int] = []
        for number in unit.pages:
            saved = folder.read_raw_page(number)
            if saved is not None and saved.reusable(self.info.reuse_key_at(self.settings.dpi)):
                rows.append(self._row(unit, started, number, PAGE_SAVED, result=saved.result))
            elif attempt > self.attempts:
                error = (
                    f"{unit.source}: page {number}: given up after {self.attempts} attempts "
                    f"(the actor decoding it died each time; see the Ray logs)"
                )
                rows.append(self._row(unit, started, number, PAGE_GIVEN_UP, error=error))
            else:
                to_decode.append(number)
        for page in self.feed.decode(unit.source, to_decode):
            rows.append(self._page_row(unit, started, folder, page))
        return rows

    def _unreachable(self, unit: WorkUnit) -> str | None:
        # URLs (s3://...) need no shared file system: every actor reads and writes the bucket.
        source_here = is_url(unit.source) or (
            os.access(unit.source, os.R_OK) and Path(unit.source).is_file()
        )
        if not source_here:
            return f"{unit.source}: cannot be read on {self.host} ({SHARED_FS_HINT})"
        if not is_url(unit.folder) and not Path(unit.folder).is_dir():
            return f"{unit.folder}: output folder not found on {self.host} ({SHARED_FS_HINT})"
        return None

    def _page_row(self, unit: WorkUnit, started: float, folder: Any, page: RawPage) -> PageRow:
        """The row of a page back from the feed, saved now unless it failed."""
        number, result = page.number, page.result
        if not result.ok:
            return self._row(unit, started, number, PAGE_FAILED, error=page.error or "")
        try:
            reuse = self.info.reuse_key_at(self.settings.dpi)
            folder.write_raw_page(RawPage(number, result, page.geometry, self.info, reuse))
        except OSError as exc:
            error = f"{folder.location}: cannot write the output folder: {exc.strerror}"
            return self._row(unit, started, number, PAGE_FAILED, error=error)
        return self._row(unit, started, number, PAGE_DECODED, result=result)

    def _row(
        self,
        unit: WorkUnit,
        started: float,
        number: int,
        status: str,
        error: str = "",
        result: PageResult | None = None,
    ) -> PageRow:
        """A page's row; with the tokens and seconds of its `result` when it was decoded now or
        found saved, and its statistics when decoded now."""
        row = PageRow(unit.unit, unit.doc, number, status, error, unit_started=started)
        row.actor, row.pid, row.node = self.actor, self.pid, self.node
        row.restarted = self.restarted
        if result is not None:
            row.prompt_tokens, row.output_tokens = result.prompt_tokens, result.output_tokens
            row.seconds = result.seconds
            row.stats = dict(result.stats) if status == PAGE_DECODED else {}
        return row
