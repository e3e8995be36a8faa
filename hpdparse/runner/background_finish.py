"""`BackgroundFinishes`: documents written on a few threads while the run goes on.

Writing a finished document (its figure crops, .json, resume state and exports, then its .md)
takes a few rounds of requests; on an object store that is long enough for the engine to decode
many pages meanwhile. The run's main thread does what needs its rasterizer pool or its report
(rendering the document, starting its crops: `DocumentFinish.start_converted`), hands the
writing here, and takes each outcome back between results (`collect`): a document counts as
finished, in the report and on the progress display, only once its .md is written. A finish
never raises (any error becomes the document's one-line failure). At most `most` documents are
in hand at once (`submit` waits for the oldest beyond that), so what they hold in memory stays
bounded.

The run's end waits for every finish (`close`), interrupted or not; interrupted again while it
waits, it abandons them (`abandon`): those not started are dropped, the others end on their own
(the .md, written last, says whether a document was finished).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from hpdparse.runner.document_book import DocumentRun
from hpdparse.runner.finish import FinishedDocument
from hpdparse.store.statuses import STATUS_FAILED

FINISH_THREADS = 2
"""Documents written at once (each also writes its crops on threads of its own)."""

Finished = Callable[[DocumentRun, FinishedDocument], None]


class BackgroundFinishes:
    """Finishes run on `threads` threads; `on_finished(doc, outcome)` is called on the thread
    that calls `submit` and `collect` (the run's main thread)."""

    def __init__(self, on_finished: Finished, threads: int = FINISH_THREADS, most: int = 4) -> None:
        self._on_finished = on_finished
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hpdparse-finish")
        self._running: dict[Future[FinishedDocument], DocumentRun] = {}
        self._most = max(1, most)

    def submit(self, doc: DocumentRun, finish: Callable[[], FinishedDocument]) -> None:
        """Run `finish` (the writing step of `doc`'s finish) in the background."""
        while len(self._running) >= self._most:
            wait(self._running, return_when=FIRST_COMPLETED)
            self.collect()
        self._running[self._pool.submit(_never_raising, doc, finish)] = doc

    def collect(self, wait_all: bool = False) -> None:
        """Hand over the finishes done (with `wait_all`: every one, waiting for them)."""
        if wait_all:
            wait(self._running)
        for future in [future for future in self._running if future.done()]:
            doc = self._running.pop(future)
            if not future.cancelled():
                self._on_finished(doc, future.result())

    def close(self) -> None:
        """Wait for every finish, hand them over and stop the threads."""
        self.collect(wait_all=True)
        self._pool.shutdown(wait=True)

    def abandon(self) -> None:
        """Interrupted: the finishes not started are dropped (their documents stay open), those
        done are handed over, those under way end on their own, unwaited (the .md they write
        last says whether they finished)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.collect()


def _never_raising(doc: DocumentRun, finish: Callable[[], FinishedDocument]) -> FinishedDocument:
    try:
        return finish()
    except Exception as exc:  # a bug while finishing must fail this document, not the run
        message = f"{doc.folder.location}: cannot finish the document: {type(exc).__name__}: {exc}"
        return FinishedDocument(False, STATUS_FAILED, message, [message])
