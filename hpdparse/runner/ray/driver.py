"""`RayConverter`: the driver of a `convert --ray` run.

1. Plan every document with the plan stage (`plan_document`: skip it, or claim its folder and
   keep its reusable raw pages) and cut the pages still to decode into `WorkUnit`s.
2. One Ray Dataset row per unit, one block per row (Ray would otherwise hand a small work list to
   a single actor), `map_batches` through `PageDecoder` actors.
3. Consume the page rows as units finish, anywhere in the cluster: progress, counters, and a
   document is finished (`start_converted`, on the driver) as soon as all its pages are in.
   Meanwhile `watch` threads show the actors alive (from the `run_book`'s heartbeats) and end
   a run no row comes back to.
4. A unit whose actor died on every attempt (Ray retries it on a restarted actor) is dropped
   by Ray Data (`max_errored_blocks=-1`) and its pages not on disk are failed pages here.
Resume is the output folder's, as for a single-machine run: a killed driver leaves only atomic
files, and the same command plans again from what is saved.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpdparse.engines.base import EngineConfig, EngineInfo
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import create_engine
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.remote import is_url
from hpdparse.runner.document_book import DocumentBook
from hpdparse.runner.document_run import DocumentRun
from hpdparse.runner.images import PoolCutter
from hpdparse.runner.overlay import PoolOverlay
from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import (
    PAGE_DECODED,
    PAGE_FAILED,
    PAGE_GIVEN_UP,
    PAGE_NO_ENGINE,
    PAGE_SAVED,
    PageRow,
    WorkUnit,
    cut_units,
)
from hpdparse.runner.ray.watch import ActorWatch, StallWatch
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from hpdparse.settings import TextLayerMode
from hpdparse.store.output_store import open_output_store
from hpdparse.store.report import ActorReport, ClusterReport, RunReport

DRIVER_RASTERIZERS = 2  # the driver only cuts figure images and draws --layout overlays


class RayConverter:
    """One `convert --ray` run over a list of input files."""

    def __init__(
        self,
        engine: str,
        config: EngineConfig,
        settings: ConvertSettings,
        ray_settings: RaySettings,
        *,
        options: EngineOptions | Mapping[str, Any] | None = None,
        server: str = "",
        progress: Progress | None = None,
    ) -> None:
        self.engine_name = engine
        self.config = config
        self.options = options
        self.server = server
        self.settings = settings
        self.ray_settings = ray_settings
        self.progress = progress or Progress()
        from hpdparse.runner.ray.cluster import import_ray

        import_ray()  # a one-line EngineError now, before any folder is claimed, without Ray
        # Made here, not started: it says what the actors will record (the reuse key) and
        # prepares nothing. Unknown options fail now, before the cluster is touched.
        self._engine = create_engine(engine, config, options, server=server)
        self._store = open_output_store(settings.output_dir)
        self._book = DocumentBook(settings, self.progress)  # a new one for each run()
        self._units: dict[int, WorkUnit] = {}
        self._rows: dict[int, dict[int, PageRow]] = {}  # unit -> page -> row
        self._actors: dict[str, ActorReport] = {}
        self._pids: dict[str, set[int]] = {}
        self._restarted: set[str] = set()
        self._given_up: set[int] = set()
        self._pool: WorkerPool | None = None
        self._info: EngineInfo | None = None
        # Wall clock (the rows come from other processes): when the first unit began, when the
        # last row came. Decoding counts from then, as a run on this machine counts from the
        # engine's first page, not from starting it.
        self._first_row: float | None = None
        self._last_row: float | None = None

    def run(self, sources: list[Path], input_errors: Sequence[HpdparseError] = ()) -> RunReport:
        started = time.monotonic()
        book = self._book = DocumentBook(self.settings, self.progress)
        report = self._report = book.report
        report.cluster = ClusterReport(address=self.ray_settings.address)
        book.add(self._store, sources, input_errors)
        stall: StallWatch | None = None
        try:
            self._engine.open()
            self._info = self._engine.info
            if self.settings.render_options.text_layer == TextLayerMode.PREFER:
                self.progress.warning(
                    "--text-layer prefer is not supported with --ray yet; the run verifies instead"
                )
            self._pool = WorkerPool(DRIVER_RASTERIZERS, self._engine.preparer())
            overlay = None
            if self.settings.layout:
                overlay = PoolOverlay(self._pool, self.settings.password)
            book.engine_opened(self._info, PoolCutter(self._pool, self.settings.password), overlay)
            units = self._plan_all()
            report.cluster.units = len(units)
            if units:
                stall = StallWatch(self.ray_settings.stall_seconds)
                self._decode(units, stall)
                self._give_up_lost_units()
        except KeyboardInterrupt:
            if stall is not None and stall.fired:
                seconds = self.ray_settings.stall_seconds
                self._engine_failed(f"--ray: no page came back for {seconds:g} s")
            else:
                report.interrupted = True
        except HpdparseError as exc:
            self._engine_failed(str(exc))
        except Exception as exc:  # Ray's errors: the job as a whole failed
            from hpdparse.runner.ray.cluster import ray_error_line

            self._engine_failed(f"--ray: the Ray job failed: {ray_error_line(exc)}")
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel=True)
        report.cluster.actors = sorted(self._actors.values(), key=lambda a: (a.node, a.actor))
        for actor in report.cluster.actors:
            processes = len(self._pids.get(actor.actor, ()))
            actor.restarts = max(processes - 1, 1 if actor.actor in self._restarted else 0)
        return book.end(started, self._first_row, self._last_row)

    def _engine_failed(self, message: str) -> None:
        self._report.engine_error = message
        self.progress.error(message)

    # --- planning ---

    def _plan_all(self) -> list[WorkUnit]:
        assert self._info is not None
        units: list[WorkUnit] = []
        for index, doc in enumerate(self._book.docs):
            to_decode, events = self._book.plan(doc, self._info)
            for event in events:
                self._book.handle(event)
            if not to_decode:
                continue
            location = doc.folder.location
            folder = location if is_url(location) else str(Path(location).absolute())
            units += cut_units(
                len(units),
                index,
                str(doc.source),
                folder,
                to_decode,
                self.ray_settings.unit_pages,
            )
        self._units = {u.unit: u for u in units}
        return units

    # --- the dataset ---

    def _decode(self, units: list[WorkUnit], stall: StallWatch) -> None:
        """Runs the units on the cluster and takes each page row as it comes back."""
        from hpdparse.runner.ray.cluster import connected, ray_data_context
        from hpdparse.runner.ray.run_book import end_run_book, start_run_book

        with (
            connected(self.ray_settings.address, self.progress.verbose) as ray,
            ray_data_context(self.ray_settings, self.progress.verbose),
        ):
            book = start_run_book(ray)
            rows: Any = None
            try:
                dataset, actors = self._dataset(ray, units, book)
                rows = iter(dataset.iter_rows())
                with stall, ActorWatch(ray, book, self.progress, actors):
                    self.progress.decoding_started()
                    for row in rows:
                        stall.last = time.monotonic()
                        self._take_row(PageRow.from_row(row))
            finally:
                # Ray Data ends its execution (the actors with it) when its row generator is
                # closed; one the loop left by an exception would wait for the garbage collector.
                if rows is not None:
                    rows.close()
                end_run_book(ray, book)

    def _take_row(self, page: PageRow) -> None:
        if page.status == PAGE_NO_ENGINE:
            raise EngineError(f"--ray: {page.error}")  # run() fails the run on this line
        self._last_row = time.time()
        if page.unit_started and (self._first_row is None or page.unit_started < self._first_row):
            self._first_row = page.unit_started
        self._on_row(page)

    def _dataset(self, ray: Any, units: list[WorkUnit], book: Any) -> tuple[Any, int]:
        """The dataset of page rows, and how many engine actors it runs on."""
        resources = ray.cluster_resources()
        use_gpus = self.engine_name != "openai" and resources.get("GPU", 0) >= 1
        # What the cluster cannot hold is fitted (--ray local) or refused now, in one line.
        rs, note = self.ray_settings.fitted(
            len(units), resources.get("CPU", 0), resources.get("GPU", 0), use_gpus
        )
        if note:
            self.progress.warning(note)
        self.ray_settings = rs
        actors = rs.actors
        calls = rs.calls_per_actor(self.settings.batch_size)
        assert self._report.cluster is not None
        self._report.cluster.actors_requested = actors
        self.progress.info(
            f"ray: {actors} engine actors ({'1 GPU' if use_gpus else f'{rs.cpus_per_actor:g} CPUs'}"
            f" each), {len(units)} work units of up to {rs.unit_pages} pages"
        )
        assert self._info is not None
        dataset = ray.data.from_items([u.to_row() for u in units], override_num_blocks=len(units))
        with warnings.catch_warnings():
            # max_restarts and max_task_retries have no named parameter in Ray 2.60 (the pinned
            # range); the deprecation concerns Ray 2.64.
            warnings.simplefilter("ignore", DeprecationWarning)
            mapped = self._map(dataset, actors, calls, use_gpus, book)
        return mapped, actors

    def _map(self, dataset: Any, actors: int, calls: int, use_gpus: bool, book: Any) -> Any:
        from ray.data import ActorPoolStrategy

        from hpdparse.runner.ray.actor import ACTOR_RUNTIME_ENV, PageDecoder

        assert self._info is not None
        rs = self.ray_settings
        return dataset.map_batches(
            PageDecoder,
            batch_size=1,
            compute=ActorPoolStrategy(
                size=actors,
                max_tasks_in_flight_per_actor=calls,
                max_concurrent_calls_per_actor=calls,
                enable_true_multi_threading=True,
            ),
            fn_constructor_kwargs={
                "engine_name": self.engine_name,
                "config": self.config,
                "options": self.options,
                "server": self.server,
                "settings": self.settings,
                "ray_settings": rs,
                "reuse_key": self._info.reuse_key(),
                "driver_cwd": os.getcwd(),
                "run_book": book,
            },
            num_cpus=rs.cpus_per_actor,
            num_gpus=1 if use_gpus else None,
            runtime_env=ACTOR_RUNTIME_ENV,
            # Ray retries a unit whose actor died until an actor begins it: the attempts that
            # count are the beginnings (run_book.RunBook), not a restarting actor's refusals.
            max_restarts=-1,
            max_task_retries=-1,
        )

    # --- results ---

    def _on_row(self, row: PageRow) -> None:
        unit = self._units[row.unit]
        rows = self._rows.setdefault(row.unit, {})
        assert self._report.cluster is not None
        if row.page in rows:  # a retried unit's rows came again
            self._report.cluster.pages_redone += 1
            return
        rows[row.page] = row
        if row.status == PAGE_GIVEN_UP and row.unit not in self._given_up:
            self._given_up.add(row.unit)
            self._report.cluster.units_given_up += 1
        self._count_actor(row, first_of_unit=len(rows) == 1)
        doc = self._book.docs[row.doc]
        self._page_in(doc, row)
        if len(rows) == len(unit.pages):
            self.progress.info(
                f"unit {row.unit} ({len(unit.pages)} pages of {unit.source}) done by actor "
                f"{row.actor[:8]} on {row.node}"
            )
            self._book.complete(doc)

    def _count_actor(self, row: PageRow, first_of_unit: bool) -> None:
        actor = self._actors.setdefault(row.actor, ActorReport(actor=row.actor, node=row.node))
        self._pids.setdefault(row.actor, set()).add(row.pid)
        if row.restarted:
            self._restarted.add(row.actor)
        if first_of_unit:
            actor.units += 1
        if row.status in (PAGE_FAILED, PAGE_GIVEN_UP):
            actor.pages_failed += 1
        elif row.status == PAGE_SAVED:
            assert self._report.cluster is not None
            self._report.cluster.pages_recovered += 1
        else:
            actor.pages_decoded += 1
            actor.output_tokens += row.output_tokens
            actor.engine_seconds += row.seconds

    def _page_in(self, doc: DocumentRun, row: PageRow) -> None:
        if row.status in (PAGE_FAILED, PAGE_GIVEN_UP):
            self._book.page_failed(doc, row.page, row.error)
        else:  # a page saved by an earlier attempt of this run's unit was decoded in this run too
            self._book.page_decoded(doc, row.prompt_tokens, row.output_tokens, row.stats)

    def _give_up_lost_units(self) -> None:
        """Units whose rows never came (Ray Data dropped them after an error of its own): the
        pages an attempt saved before dying count, the others are failed pages."""
        assert self._info is not None and self._report.cluster is not None
        attempts = self.ray_settings.unit_attempts
        for unit in self._units.values():
            rows = self._rows.setdefault(unit.unit, {})
            missing = [n for n in unit.pages if n not in rows]
            if not missing:
                continue
            self._report.cluster.units_given_up += 1
            doc = self._book.docs[unit.doc]
            for number in missing:
                saved = doc.folder.read_raw_page(number)
                if saved is not None and saved.reusable(self._info.reuse_key_at(self.settings.dpi)):
                    result = saved.result
                    row = PageRow(
                        unit.unit,
                        unit.doc,
                        number,
                        PAGE_DECODED,
                        prompt_tokens=result.prompt_tokens,
                        output_tokens=result.output_tokens,
                    )
                else:
                    error = (
                        f"{unit.source}: page {number}: given up after {attempts} attempts "
                        f"(Ray dropped its work unit; see the Ray logs)"
                    )
                    row = PageRow(unit.unit, unit.doc, number, PAGE_FAILED, error=error)
                rows[number] = row
                self._page_in(doc, row)
            self._book.complete(doc)
