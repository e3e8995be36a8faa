"""Progress display: rich bars on a terminal, plain log lines otherwise, only errors when quiet.

Errors always go to stderr as one line naming the file, whatever the mode. Rates (pages/s,
tokens/s) count from the moment the engine takes its first page (`decoding_started`), as the
run summary's do, so the time spent loading the model or skipping finished documents is not in
them.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from hpdparse.store.report import DocumentReport
from hpdparse.store.statuses import STATUS_CONVERTED, STATUS_SKIPPED

Clock = Callable[[], float]


class Progress:
    """Quiet mode (and the base of the others): nothing but errors, on stderr. It keeps the
    rates (pages and output tokens per second since decoding started) and the `--ray` actors'
    figures that the others show."""

    def __init__(
        self, stream: TextIO | None = None, verbose: bool = False, clock: Clock = time.monotonic
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.verbose = verbose
        self._clock = clock
        self._decoding_since: float | None = None
        self._pages = self._tokens = 0
        self._actors = ""  # the actors' figures, once the driver told them
        self._started = clock()
        self._documents = self._finished = 0
        self._lock = threading.Lock()

    def start(self, documents: int) -> None:
        pass

    def document_started(self, name: str, pages_total: int, pages_to_decode: int) -> None:
        pass

    def decoding_started(self) -> None:
        """The engine took its first page: rates count from now."""
        if self._decoding_since is None:
            self._decoding_since = self._clock()

    def pages_done(self, pages: int, output_tokens: int) -> None:
        self._pages += pages
        self._tokens += output_tokens

    def _per_second(self) -> tuple[float, float]:
        """Pages and output tokens per second since decoding started (0 before)."""
        if self._decoding_since is None:
            return 0.0, 0.0
        elapsed = max(self._clock() - self._decoding_since, 1e-9)
        return self._pages / elapsed, self._tokens / elapsed

    def document_finished(self, doc: DocumentReport) -> None:
        pass

    def actors_alive(self, alive: int, wanted: int, restarts: int = 0, done: int = 0) -> None:
        """`--ray`: engine actors alive now of those wanted, restarts so far, and actors done
        (let go with no work left for them). Called from another thread than the other hooks,
        when a figure changes."""
        restarted = f", {restarts} restarted" if restarts else ""
        finished = f", {done} done" if done else ""
        self._actors = f"{alive}/{wanted} actors alive{restarted}{finished}"

    def info(self, message: str) -> None:
        """A notable event, shown with --verbose."""
        if self.verbose:
            self._say(message)

    def _say(self, message: str) -> None:
        """One line of the display (none in quiet mode)."""

    def error(self, message: str) -> None:
        self._tagged("error", message)

    def warning(self, message: str) -> None:
        """Something the run changed or works around, shown even with --quiet."""
        self._tagged("warning", message)

    def _tagged(self, tag: str, message: str) -> None:
        print(f"{tag}: {message}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class PlainProgress(Progress):
    """One log line per document (and per notable event with --verbose), for logs and pipes."""

    def _say(self, message: str) -> None:
        elapsed = self._clock() - self._started
        with self._lock:
            print(f"[{elapsed:8.1f}s] {message}", file=self.stream, flush=True)

    def start(self, documents: int) -> None:
        self._started = self._clock()
        self._documents = documents

    def document_started(self, name: str, pages_total: int, pages_to_decode: int) -> None:
        if self.verbose:
            reused = pages_total - pages_to_decode
            extra = f", {reused} reused from an earlier run" if reused else ""
            self._say(f"start {name}: {pages_to_decode} pages to decode{extra}")

    def document_finished(self, doc: DocumentReport) -> None:
        self._finished += 1
        if doc.status == STATUS_SKIPPED and not self.verbose:
            return
        pages_per_s, tokens_per_s = self._per_second()
        pages = f", {doc.pages_done}/{doc.pages} pages" if doc.pages else ""
        failed = f", {doc.pages_failed} failed" if doc.pages_failed else ""
        actors = f", {self._actors}" if self._actors else ""
        self._say(
            f"{doc.status} {doc.source}{pages}{failed} "
            f"({self._finished}/{self._documents} documents, {pages_per_s:.2f} pages/s, "
            f"{tokens_per_s:.0f} tokens/s{actors})"
        )

    def actors_alive(self, alive: int, wanted: int, restarts: int = 0, done: int = 0) -> None:
        super().actors_alive(alive, wanted, restarts, done)
        self._say(f"ray: {self._actors}")


class RichProgress(Progress):
    """Bars for documents and pages with pages/s, tokens/s and ETA, for a terminal."""

    def __init__(
        self, stream: TextIO | None = None, verbose: bool = False, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(stream, verbose, clock)
        from rich import progress as bars
        from rich.console import Console

        self.console = Console(file=self.stream)
        self._bars = bars.Progress(
            bars.TextColumn("{task.description:<10}"),
            bars.BarColumn(),
            bars.MofNCompleteColumn(),
            bars.TextColumn("{task.fields[rate]}"),
            bars.TimeElapsedColumn(),
            bars.TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._docs = self._bars.add_task("documents", total=None, rate="")
        self._pages_bar = self._bars.add_task("pages", total=0, rate="")
        self._bars.start()

    def start(self, documents: int) -> None:
        self._bars.update(self._docs, total=documents)

    def document_started(self, name: str, pages_total: int, pages_to_decode: int) -> None:
        task = self._bars.tasks[self._pages_bar]
        self._bars.update(self._pages_bar, total=(task.total or 0) + pages_to_decode)
        if self.verbose:
            self._say(f"start {name}: {pages_to_decode} pages to decode")

    def pages_done(self, pages: int, output_tokens: int) -> None:
        super().pages_done(pages, output_tokens)
        self._bars.update(self._pages_bar, advance=pages, rate=self._rate_text())

    def actors_alive(self, alive: int, wanted: int, restarts: int = 0, done: int = 0) -> None:
        super().actors_alive(alive, wanted, restarts, done)
        self._bars.update(self._pages_bar, rate=self._rate_text())

    def _rate_text(self) -> str:
        pages_per_s, tokens_per_s = self._per_second()
        actors = f" {self._actors}" if self._actors else ""
        return f"{pages_per_s:.2f} pages/s {tokens_per_s:.0f} tok/s{actors}"

    def document_finished(self, doc: DocumentReport) -> None:
        self._bars.update(self._docs, advance=1)
        if self.verbose or doc.status not in (STATUS_CONVERTED, STATUS_SKIPPED):
            from rich.text import Text

            colour = "green" if doc.status == STATUS_CONVERTED else "yellow"
            self.console.print(Text.assemble((doc.status, colour), " ", doc.source))

    def _say(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def _tagged(self, tag: str, message: str) -> None:
        from rich.text import Text

        colour = "red" if tag == "error" else "yellow"
        self.console.print(Text.assemble((f"{tag}:", colour), " ", message), soft_wrap=True)

    def close(self) -> None:
        self._bars.stop()


def make_progress(
    quiet: bool = False, verbose: bool = False, stream: TextIO | None = None
) -> Progress:
    """Quiet: errors only. Otherwise rich bars when `stream` (stderr) is a terminal, log lines when
    it is not."""
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return Progress(stream)
    if stream.isatty():
        return RichProgress(stream, verbose)
    return PlainProgress(stream, verbose)


class _LoggedWarnings(logging.Handler):
    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.WARNING)
        self._progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.warning(record.getMessage())


@contextlib.contextmanager
def logged_warnings_shown(progress: Progress, quiet: bool = False) -> Iterator[None]:
    """While a command runs, the warnings hpdparse's lower layers log (an engine's: a server
    without log-probabilities) are shown as the run's own, one `warning: ...` line each,
    instead of reaching Python's bare last-resort output; with --quiet (nothing but errors)
    they are not shown at all."""
    logger = logging.getLogger("hpdparse")
    # quiet: a handler all the same, which keeps them from Python's last-resort output
    handler = logging.NullHandler() if quiet else _LoggedWarnings(progress)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
