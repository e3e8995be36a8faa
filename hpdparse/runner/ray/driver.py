"""`RayConverter`: the driver of a `convert --ray` run.

1. Plan every document with the plan stage (`plan_document`: skip it, or claim its folder and
   keep its reusable raw pages) and cut the pages still to decode into `WorkUnit`s.
2. One Ray Dataset row per unit, one block per row (Ray would otherwise hand a small work list to
   a single actor), `map_batches` through `PageDecoder` actors.
3. Consume the page rows as units finish, anywhere in the cluster: progress, counters, and a
   document is finished (`DocumentFinish`, on the driver) as soon as all its pages are in.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpdparse.engines.base import Engine, EngineInfo
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.remote import is_url
from hpdparse.runner.document_book import DocumentBook
from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.ray.units import (
    PAGE_FAILED,
    PAGE_GIVEN_UP,
    PAGE_NO_ENGINE,
    PAGE_SAVED,
    PageRow,
    WorkUnit,
    cut_units,
)
from hpdparse.runner.ray.watch import StallWatch, actors_watched
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from hpdparse.settings import TextLayerMode
from hpdparse.store.report import ActorReport, ClusterReport, RunReport

DRIVER_RASTERIZERS = 2  # the driver only cuts figure images and draws --layout overlays


class RayConverter:
    """One `convert --ray` run over a list of input files."""

    def __init__(
        self,
        make_engine: Callable[[], Engine],
        settings: ConvertSettings,
        ray_settings: RaySettings,
        progress: Progress | None = None,
    ) -> None:
        """`make_engine` makes the run's engine, not started, here and in every actor (so it is
        picklable: `functools.partial(create_engine, ...)`)."""
        self.make_engine = make_engine
        self.settings = settings
        self.ray_settings = ray_settings
        self.progress = progress or Progress()
        from hpdparse.runner.ray.cluster import import_ray

        import_ray()  # a one-line EngineError now, before any folder is claimed, without Ray
        # Made here, not started: it says what the actors will record (the reuse key) and
        # prepares nothing. Unknown options fail now, before the cluster is touched.
        self._engine = make_engine()
        self._units: dict[int, WorkUnit] = {}
        self._rows: dict[int, set[int]] = {}  # unit -> its pages whose row came
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
        book = self._book = DocumentBook(self.settings, self.progress, sources, input_errors)
        self._cluster = ClusterReport(address=self.ray_settings.address)
        book.report.cluster = self._cluster
        stall: StallWatch | None = None
        failure: str | None = None
        try:
            self._engine.open()
            self._info = self._engine.info
            if self.settings.render_options.text_layer == TextLayerMode.PREFER:
                self.progress.warning(
                    "--text-layer prefer is not supported with --ray yet; the run verifies instead"
                )
            self._pool = WorkerPool(DRIVER_RASTERIZERS, self._engine.preparer())
            book.engine_opened(self._info, self._pool)
            units = self._plan_all()
            self._cluster.units = len(units)
            if units:
                stall = StallWatch(self.ray_settings.stall_seconds)
                self._decode(units, stall)
                self._give_up_lost_units()
        except KeyboardInterrupt:
            if stall is not None and stall.fired:
                failure = f"--ray: no page came back for {self.ray_settings.stall_seconds:g} s"
            else:
                book.report.interrupted = True
        except HpdparseError as exc:
            failure = str(exc)
        except Exception as exc:  # Ray's errors: the job as a whole failed
            from hpdparse.runner.ray.cluster import ray_error_line

            failure = f"--ray: the Ray job failed: {ray_error_line(exc)}"
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel=True)
        if failure is not None:
            book.report.engine_error = failure
            self.progress.error(failure)
        self._cluster.actors = sorted(self._actors.values(), key=lambda a: (a.node, a.actor))
        for actor in self._cluster.actors:
            processes = len(self._pids.get(actor.actor, ()))
            actor.restarts = max(processes - 1, 1 if actor.actor in self._restarted else 0)
        return book.end(self._first_row, self._last_row)

    # --- planning ---

    def _plan_all(self) -> list[WorkUnit]:
        assert self._info is not None
        units: list[WorkUnit] = []
        pages = self.ray_settings.unit_pages
        for index, doc in enumerate(self._book.docs):
            to_decode, then = self._book.plan(doc, self._info)
            then()
            location = doc.folder.location
            folder = location if is_url(location) else str(Path(location).absolute())
            units += cut_units(len(units), index, str(doc.source), folder, to_decode, pages)
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
                with stall, actors_watched(ray, book, self.progress, actors):
                    self.progress.decoding_started()
                    for row in rows:
                        stall.last = time.monotonic()
                        self._on_row(PageRow.from_row(row))
            finally:
                # Ray Data ends its execution (the actors with it) when its row generator is
                # closed; one the loop left by an exception would wait for the garbage collector.
                if rows is not None:
                    rows.close()
                end_run_book(ray, book)

    def _dataset(self, ray: Any, units: list[WorkUnit], book: Any) -> tuple[Any, int]:
        """The dataset of page rows, and how many engine actors it runs on."""
        from ray.data import ActorPoolStrategy

        from hpdparse.runner.ray.actor import ACTOR_RUNTIME_ENV, PageDecoder

        resources = ray.cluster_resources()
        use_gpus = self._engine.name != "openai" and resources.get("GPU", 0) >= 1
        # What the cluster cannot hold is fitted (--ray local) or refused now, in one line.
        rs, note = self.ray_settings.fitted(
            len(units), resources.get("CPU", 0), resources.get("GPU", 0), use_gpus
        )
        if note:
            self.progress.warning(note)
        self.ray_settings = rs
        calls = rs.calls_per_actor(self.settings.batch_size)
        self._cluster.actors_requested = rs.actors
        self.progress.info(
            f"ray: {rs.actors} engine actors "
            f"({'1 GPU' if use_gpus else f'{rs.cpus_per_actor:g} CPUs'} each), "
            f"{len(units)} work units of up to {rs.unit_pages} pages"
        )
        assert self._info is not None
        dataset = ray.data.from_items([u.to_row() for u in units], override_num_blocks=len(units))
        with warnings.catch_warnings():
            # max_restarts and max_task_retries have no named parameter in Ray 2.60 (the pinned
            # range); the deprecation concerns Ray 2.64.
            warnings.simplefilter("ignore", DeprecationWarning)
            mapped = dataset.map_batches(
                PageDecoder,
                batch_size=1,
                compute=ActorPoolStrategy(
                    size=rs.actors,
                    max_tasks_in_flight_per_actor=calls,
                    max_concurrent_calls_per_actor=calls,
                    enable_true_multi_threading=True,
                ),
                fn_constructor_kwargs={
                    "make_engine": self.make_engine,
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
        return mapped, rs.actors

    # --- results ---

    def _on_row(self, row: PageRow) -> None:
        if row.status == PAGE_NO_ENGINE:
            raise EngineError(f"--ray: {row.error}")  # run() fails the run on this line
        self._last_row = time.time()
        if row.unit_started and (self._first_row is None or row.unit_started < self._first_row):
            self._first_row = row.unit_started
        unit, rows = self._units[row.unit], self._rows.setdefault(row.unit, set())
        if row.page in rows:  # a retried unit's rows came again
            self._cluster.pages_redone += 1
            return
        rows.add(row.page)
        if row.status == PAGE_GIVEN_UP and row.unit not in self._given_up:
            self._given_up.add(row.unit)
            self._cluster.units_given_up += 1
        self._count_actor(row, first_of_unit=len(rows) == 1)
        if len(rows) == len(unit.pages):
            self.progress.info(
                f"unit {row.unit} ({len(unit.pages)} pages of {unit.source}) done by actor "
                f"{row.actor[:8]} on {row.node}"
            )
        doc = self._book.docs[row.doc]
        if row.status in (PAGE_FAILED, PAGE_GIVEN_UP):
            self._book.page_failed(doc, row.page, row.error)
        else:  # a page saved by an earlier attempt of this run's unit was decoded in this run too
            self._book.page_decoded(doc, row.prompt_tokens, row.output_tokens, row.stats)

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
            self._cluster.pages_recovered += 1
        else:
            actor.pages_decoded += 1
            actor.output_tokens += row.output_tokens
            actor.engine_seconds += row.seconds

    def _give_up_lost_units(self) -> None:
        """Units whose rows never came (Ray Data dropped them after an error of its own): the
        pages an attempt saved before dying count, the others are failed pages."""
        assert self._info is not None
        key, attempts = self._info.reuse_key_at(self.settings.dpi), self.ray_settings.unit_attempts
        for unit in self._units.values():
            missing = [n for n in unit.pages if n not in self._rows.get(unit.unit, ())]
            if missing:
                self._cluster.units_given_up += 1
            doc = self._book.docs[unit.doc]
            for number in missing:
                saved = doc.folder.read_raw_page(number)
                if saved is not None and saved.reusable(key):
                    result = saved.result
                    self._book.page_decoded(doc, result.prompt_tokens, result.output_tokens, {})
                else:
                    error = (
                        f"{unit.source}: page {number}: given up after {attempts} attempts "
                        f"(Ray dropped its work unit; see the Ray logs)"
                    )
                    self._book.page_failed(doc, number, error)
