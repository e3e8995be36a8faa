"""Documents finished in the background (`BackgroundFinishes`, real threads): outcomes handed
over on the caller's thread, a failing finish failing only its document, at most `most` in hand,
the run's end waiting for all; and, through the scheduler, a document counted finished (report,
progress) only once its .md is written."""

from __future__ import annotations

import threading
from pathlib import Path

from hpdparse.runner.background_finish import BackgroundFinishes
from hpdparse.runner.document_book import DocumentRun
from hpdparse.runner.finish import FinishedDocument
from hpdparse.runner.progress import Progress
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import ConvertSettings
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.report import DocumentReport
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import ScriptedEngine


def _doc(tmp_path: Path, name: str) -> DocumentRun:
    folder = open_document_folder(str(tmp_path / name))
    return DocumentRun(tmp_path / f"{name}.pdf", folder, DocumentReport(source=name))


def _converted() -> FinishedDocument:
    return FinishedDocument(written=True, status="converted")


def test_a_failing_finish_fails_its_document_only_and_outcomes_come_on_the_callers_thread(
    tmp_path: Path,
) -> None:
    handed: list[tuple[str, str, str | None, threading.Thread]] = []

    def on_finished(doc: DocumentRun, finished: FinishedDocument) -> None:
        handed.append(
            (doc.report.source, finished.status, finished.error, threading.current_thread())
        )

    def broken() -> FinishedDocument:
        raise ValueError("a bug")

    finishes = BackgroundFinishes(on_finished)
    finishes.submit(_doc(tmp_path, "a"), _converted)
    finishes.submit(_doc(tmp_path, "b"), broken)
    finishes.submit(_doc(tmp_path, "c"), _converted)
    finishes.close()
    outcomes = {source: (status, error) for source, status, error, _ in handed}
    assert outcomes["a"] == outcomes["c"] == ("converted", None)
    status, error = outcomes["b"]
    assert status == "failed"
    assert error == f"{tmp_path / 'b'}: cannot finish the document: ValueError: a bug"
    assert {thread for *_, thread in handed} == {threading.main_thread()}


def test_no_more_than_most_documents_are_in_hand(tmp_path: Path) -> None:
    release = threading.Event()
    started: list[str] = []
    handed: list[str] = []

    def finish(name: str):
        def run() -> FinishedDocument:
            started.append(name)
            release.wait(10)
            return _converted()

        return run

    finishes = BackgroundFinishes(lambda doc, _: handed.append(doc.report.source), most=2)
    finishes.submit(_doc(tmp_path, "a"), finish("a"))
    finishes.submit(_doc(tmp_path, "b"), finish("b"))
    third = threading.Thread(target=finishes.submit, args=(_doc(tmp_path, "c"), finish("c")))
    third.start()
    third.join(0.5)
    assert third.is_alive() and handed == []  # the third waits for room
    release.set()
    third.join(10)
    finishes.close()
    assert sorted(handed) == ["a", "b", "c"]


class _MarkdownWatch(Progress):
    """Notes, when a document is reported finished, whether its .md is there already."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, bool] = {}

    def document_finished(self, doc: DocumentReport) -> None:
        stem = Path(doc.source).stem
        assert doc.output_dir is not None
        self.seen[stem] = (Path(doc.output_dir) / f"{stem}.md").is_file()


def test_a_document_counts_as_finished_only_once_its_markdown_is_written(tmp_path: Path) -> None:
    pdfs = [make_pdf(tmp_path / "in" / f"{stem}.pdf", 3, stem) for stem in ("a", "b", "c")]
    progress = _MarkdownWatch()
    settings = ConvertSettings(output_dir=tmp_path / "out", dpi=72, workers=1)
    report = Converter(ScriptedEngine(), settings, progress).run(pdfs)
    assert [d.status for d in report.documents] == ["converted"] * 3
    assert progress.seen == {"a": True, "b": True, "c": True}
