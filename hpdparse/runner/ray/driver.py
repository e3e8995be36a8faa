"""`RayConverter`: the driver of a `convert --ray` run.

1. Plan every document with the plan stage (`plan_document`: skip it, or claim its folder and
   keep its reusable raw pages) and cut the pages still to decode into `WorkUnit`s.
2. One Ray Dataset row per unit, one block per row (Ray would otherwise hand a small work list to
   a single actor), `map_batches` through `PageDecoder` actors.
3. Consume the page rows as units finish, anywhere in the cluster: progress, counters, and a
   document is finished (`finish_converted`, on the driver) as soon as all its pages are in.
   Meanwhile `watch` threads show the actors alive (from the `run_book`'s heartbeats) and end
   a run no row comes back to.
4. A unit whose actor died on every attempt (Ray retries it on a restarted actor) is dropped
   by Ray Data (`max_errored_blocks=-1`) and its pages not on disk are failed pages here.
Resume is the output folder's, as for a single-machine run: a killed driver leaves only atomic
files, and the same command plans again from what is saved.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpdparse.engines.base import EngineConfig, EngineInfo
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import create_engine
from hpdparse.errors import HpdparseError
from hpdparse.remote import is_url
from hpdparse.runner.document_run import DocumentRun, report_input_errors
from hpdparse.runner.finish import finish_converted
from hpdparse.runner.images import PoolCutter
from hpdparse.runner.overlay import PoolOverlay
from hpdparse.runner.plan import plan_document
from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import (
    PAGE_DECODED,
    PAGE_FAILED,
    PAGE_GIVEN_UP,
    PAGE_SAVED,
    PageRow,
    WorkUnit,
    cut_units,
)
from hpdparse.runner.ray.watch import ActorWatch, StallWatch
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from hpdparse.store.output_store import open_output_store
from hpdparse.store.report import ActorReport, ClusterReport, DocumentReport, RunReport
from hpdparse.store.statuses import STATUS_FAILED, STATUS_INTERRUPTED, STATUS_SKIPPED

DRIVER_RASTERIZERS = 2  # the driver only cuts figure images and draws --layout overlays


@dataclasses.dataclass(eq=False)
class _Doc:
    run: DocumentRun
    units_left: int = 0


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
        self._docs: list[_Doc] = []
        self._units: dict[int, WorkUnit] = {}
        self._rows: dict[int, dict[int, PageRow]] = {}  # unit -> page -> row
        self._actors: dict[str, ActorReport] = {}
        self._pids: dict[str, set[int]] = {}
        self._restarted: set[str] = set()
        self._given_up: set[int] = set()
        self._pool: WorkerPool | None = None
        self._cutter: PoolCutter | None = None
        self._overlay: PoolOverlay | None = None
        self._info: EngineInfo | None = None
        # Wall clock (the rows come from other processes): when the first unit began, when the
        # last row came. Decoding counts from then, as a run on this machine counts from the
        # engine's first page, not from starting it.
        self._first_row: float | None = None
        self._last_row: float | None = None

    def run(self, sources: list[Path], input_errors: Sequence[HpdparseError] = ()) -> RunReport:
        started = time.monotonic()
        report = self._report = RunReport(
            command="convert", output_dir=str(self.settings.output_dir)
        )
        report.cluster = ClusterReport(address=self.ray_settings.address)
        self._add_documents(sources, input_errors)
        self.progress.start(len(report.documents))
        stall: StallWatch | None = None
        try:
            self._engine.open()
            self._info = info = self._engine.info
            report.engine, report.model, report.revision = info.engine, info.model, info.revision
            self._pool = WorkerPool(DRIVER_RASTERIZERS, self._engine.preparer())
            self._cutter = PoolCutter(self._pool, self.settings.password)
            if self.settings.layout:
                self._overlay = PoolOverlay(self._pool, self.settings.password)
            units = self._plan_all()
            report.cluster.units = len(units)
            if units:
                stall = StallWatch(self.ray_settings.stall_seconds)
                self._decode(units, stall)
                self._give_up_lost_units()
        except KeyboardInterrupt:
            if stall is not None and stall.fired:
                seconds = self.ray_settings.stall_seconds
                report.engine_error = f"--ray: no page came back for {seconds:g} s"
                self.progress.error(report.engine_error)
            else:
                report.interrupted = True
        except HpdparseError as exc:
            report.engine_error = str(exc)
            self.progress.error(str(exc))
        except Exception as exc:  # Ray's errors: the job as a whole failed
            from hpdparse.runner.ray.cluster import ray_error_line

            report.engine_error = f"--ray: the Ray job failed: {ray_error_line(exc)}"
            self.progress.error(report.engine_error)
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel=True)
        for doc in self._docs:
            if not doc.run.done:
                if report.interrupted:
                    self._close(doc.run, STATUS_INTERRUPTED, "interrupted")
                else:
                    self._close(doc.run, STATUS_FAILED, report.engine_error or "not converted")
        report.cluster.actors = sorted(self._actors.values(), key=lambda a: (a.node, a.actor))
        for actor in report.cluster.actors:
            processes = len(self._pids.get(actor.actor, ()))
            actor.restarts = max(processes - 1, 1 if actor.actor in self._restarted else 0)
        if self._first_row is not None and self._last_row is not None:
            report.engine_seconds = self._last_row - self._first_row
        report.seconds = time.monotonic() - started
        return report

    # --- planning ---

    def _add_documents(self, sources: list[Path], input_errors: Sequence[HpdparseError]) -> None:
        report = self._report
        report_input_errors(report, self.progress, input_errors)
        folders = self._store.assign_folders(sources)
        for src in sources:
            doc_report = DocumentReport(source=str(src), output_dir=folders[src].location)
            self._docs.append(_Doc(DocumentRun(src.absolute(), folders[src], doc_report)))
            report.documents.append(doc_report)

    def _plan_all(self) -> list[WorkUnit]:
        assert self._info is not None
        units: list[WorkUnit] = []
        for index, doc in enumerate(self._docs):
            run = doc.run
            run.started = time.monotonic()
            try:
                plan = plan_document(run.folder, run.source, self.settings, self._info)
            except HpdparseError as exc:
                self._fail(run, str(exc))
                continue
            run.state = plan.state
            selected = len(plan.state.selected)
            if plan.skip:
                run.report.pages = run.report.pages_done = run.report.pages_reused = selected
                self._close(run, STATUS_SKIPPED, None)
                continue
            run.report.pages = selected
            run.report.pages_reused = plan.reused
            run.pending = len(plan.to_decode)
            self.progress.document_started(str(run.source), selected, len(plan.to_decode))
            if not plan.to_decode:
                self._finish(run)
                continue
            location = run.folder.location
            folder = location if is_url(location) else str(Path(location).absolute())
            doc_units = cut_units(
                len(units),
                index,
                str(run.source),
                folder,
                plan.to_decode,
                self.ray_settings.unit_pages,
            )
            doc.units_left = len(doc_units)
            units += doc_units
        self._units = {u.unit: u for u in units}
        return units

    # --- the dataset ---

    def _decode(self, units: list[WorkUnit], stall: StallWatch) -> None:
        """Runs the units on the cluster and takes each page row as it comes back."""
        from hpdparse.runner.ray.cluster import connected, ray_data_context
        from hpdparse.runner.ray.run_book import start_run_book

        with (
            connected(self.ray_settings.address, self.progress.verbose) as ray,
            ray_data_context(self.ray_settings, self.progress.verbose),
        ):
            book = start_run_book(ray)
            dataset, actors = self._dataset(ray, units, book)
            with stall, ActorWatch(ray, book, self.progress, actors):
                self.progress.decoding_started()
                for row in dataset.iter_rows():
                    stall.last = time.monotonic()
                    page = PageRow.from_row(row)
                    self._last_row = time.time()
                    if page.unit_started and (
                        self._first_row is None or page.unit_started < self._first_row
                    ):
                        self._first_row = page.unit_started
                    self._on_row(page)

    def _dataset(self, ray: Any, units: list[WorkUnit], book: Any) -> tuple[Any, int]:
        """The dataset of page rows, and how many engine actors it runs on."""
        rs = self.ray_settings
        resources = ray.cluster_resources()
        use_gpus = self.engine_name != "openai" and resources.get("GPU", 0) >= 1
        actors = min(
            len(units),
            rs.actor_count(resources.get("GPU", 0), resources.get("CPU", 1), use_gpus),
        )
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

        from hpdparse.runner.ray.actor import PageDecoder

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
        doc = self._docs[row.doc]
        self._page_in(doc, row)
        if len(rows) == len(unit.pages):
            self.progress.info(
                f"unit {row.unit} ({len(unit.pages)} pages of {unit.source}) done by actor "
                f"{row.actor[:8]} on {row.node}"
            )
            self._unit_done(doc)

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

    def _page_in(self, doc: _Doc, row: PageRow) -> None:
        run = doc.run
        if run.done:
            return
        assert run.state is not None
        if row.status in (PAGE_FAILED, PAGE_GIVEN_UP):
            run.state.failed_pages[row.page] = row.error
            self.progress.error(row.error)
            self.progress.pages_done(1, 0)
        else:
            # A page saved by an earlier attempt of this run's unit was decoded in this run too.
            r = run.report
            r.pages_decoded += 1
            r.prompt_tokens += row.prompt_tokens
            r.output_tokens += row.output_tokens
            self._report.add_stats(row.stats)
            self.progress.pages_done(1, row.output_tokens)
        run.pending -= 1

    def _unit_done(self, doc: _Doc) -> None:
        doc.units_left -= 1
        if doc.units_left == 0 and not doc.run.done:
            self._finish(doc.run)

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
            doc = self._docs[unit.doc]
            for number in missing:
                saved = doc.run.folder.read_raw_page(number)
                if saved is not None and saved.reusable(self._info.reuse_key(), self.settings.dpi):
                    meta = saved.meta
                    row = PageRow(
                        unit.unit,
                        unit.doc,
                        number,
                        PAGE_DECODED,
                        prompt_tokens=meta.prompt_tokens,
                        output_tokens=meta.output_tokens,
                    )
                else:
                    error = (
                        f"{unit.source}: page {number}: given up after {attempts} attempts "
                        f"(Ray dropped its work unit; see the Ray logs)"
                    )
                    row = PageRow(unit.unit, unit.doc, number, PAGE_FAILED, error=error)
                rows[number] = row
                self._page_in(doc, row)
            self._unit_done(doc)

    # --- documents ---

    def _finish(self, run: DocumentRun) -> None:
        assert run.state is not None and self._cutter is not None
        finished = finish_converted(
            run.folder,
            run.state,
            self.settings.render_options,
            self._cutter,
            run.report,
            self._overlay,
        )
        for message in finished.warnings:
            self.progress.error(message)
        self._close(run, finished.status, finished.error)

    def _fail(self, run: DocumentRun, message: str) -> None:
        self.progress.error(message)
        self._close(run, STATUS_FAILED, message)

    def _close(self, run: DocumentRun, status: str, error: str | None) -> None:
        run.done = True
        r = run.report
        r.status = status
        r.error = error
        if run.started:
            r.seconds = time.monotonic() - run.started
        if status == STATUS_FAILED and not run.state:
            r.output_dir = None
        self.progress.document_finished(r)
