"""Finishing a document from its raw pages, the one way documents are written: by `convert`
(`DocumentFinish.start_converted`) and by `render` (`render_folders`), with the same result."""

from __future__ import annotations

import shutil
from pathlib import Path

from hpdparse.engines.base import PageResult
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.finish import DocumentFinish
from hpdparse.runner.images import ImageWork
from hpdparse.runner.plan import plan_document
from hpdparse.runner.render_folders import render_folders
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import ConvertSettings
from hpdparse.sources.document import PageGeometry
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.raw_pages import RawPage
from hpdparse.store.report import DocumentReport
from hpdparse.store.state import DocumentState
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import SCRIPTED_INFO, ScriptedEngine

PAGE = PageGeometry(595, 842, 72, "i", 595.0, 842.0)
OPTIONS = RenderOptions()


def planned(tmp_path: Path, pages: int) -> tuple[Path, DocumentFolder, DocumentState]:
    pdf = make_pdf(tmp_path / "doc.pdf", pages)
    folder = open_document_folder(tmp_path / "out" / "doc")
    settings = ConvertSettings(output_dir=tmp_path / "out", dpi=72)
    return pdf, folder, plan_document(folder, pdf, settings, SCRIPTED_INFO).state


def save(folder: DocumentFolder, number: int) -> None:
    text = f"<BLOCK>text [100, 100, 900, 140]<CHILD>Words of page {number}."
    result = PageResult((0, number), text, "stop")
    folder.write_raw_page(
        RawPage(number, result, PAGE, SCRIPTED_INFO, SCRIPTED_INFO.reuse_key_at(72))
    )


def test_all_pages_in_gives_a_converted_document(tmp_path: Path) -> None:
    pdf, folder, state = planned(tmp_path, 2)
    save(folder, 1)
    save(folder, 2)
    report = DocumentReport(source=str(pdf))
    finished = DocumentFinish(folder, state, OPTIONS, ImageWork(None), report).start()()
    assert finished.written and finished.status == "converted" and finished.error is None
    assert (report.pages, report.pages_done, report.pages_failed) == (2, 2, 0)
    md = (tmp_path / "out" / "doc" / "doc.md").read_text(encoding="utf-8")
    assert "Words of page 1." in md and "Words of page 2." in md
    assert (tmp_path / "out" / "doc" / "doc.json").is_file()
    assert folder.load_state().status == "converted"


def test_a_failed_page_gives_a_partial_document(tmp_path: Path) -> None:
    pdf, folder, state = planned(tmp_path, 3)
    save(folder, 1)
    save(folder, 3)
    state.failed_pages[2] = f"{pdf}: page 2: the engine gave no text"
    report = DocumentReport(source=str(pdf))
    finished = DocumentFinish(folder, state, OPTIONS, ImageWork(None), report).start_converted()()
    assert finished.status == "partial" and finished.error == "page 2: the engine gave no text"
    assert report.failed_pages == {2: f"{pdf}: page 2: the engine gave no text"}
    assert (report.pages_done, report.pages_failed) == (2, 1)
    saved = folder.load_state()
    assert saved.status == "partial" and saved.failed_pages == report.failed_pages
    assert "page 2" in (tmp_path / "out" / "doc" / "doc.md").read_text(encoding="utf-8")


def test_no_page_converted_writes_nothing_and_leaves_no_empty_folder(tmp_path: Path) -> None:
    pdf, folder, state = planned(tmp_path, 2)
    state.failed_pages = {1: f"{pdf}: page 1: boom", 2: f"{pdf}: page 2: bang"}
    report = DocumentReport(source=str(pdf), output_dir=folder.location)
    finished = DocumentFinish(folder, state, OPTIONS, ImageWork(None), report).start_converted()()
    assert not finished.written and finished.status == "failed"
    assert finished.error == f"{pdf}: page 1: boom" and finished.warnings == []
    assert not folder.exists() and report.output_dir is None
    # With a saved page file (even a damaged one) the folder and its state stay for next time.
    pdf, folder, state = planned(tmp_path / "again", 2)
    save(folder, 1)
    (tmp_path / "again" / "out" / "doc" / "raw" / "page-0001.txt").write_text("damaged")
    report = DocumentReport(source=str(pdf), output_dir=folder.location)
    finished = DocumentFinish(folder, state, OPTIONS, ImageWork(None), report).start_converted()()
    assert finished.status == "failed" and folder.load_state() is not None
    assert report.output_dir == folder.location and not folder.has_markdown("doc")


def test_render_rebuilds_what_convert_wrote(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 2)
    out = tmp_path / "out"
    settings = ConvertSettings(output_dir=out, dpi=72, workers=1)
    assert Converter(ScriptedEngine(), settings).run([pdf]).exit_code == 0
    doc = out / "doc"
    files = [
        "doc.md",
        "doc.json",
        "images/page-0001-figure-01.png",
        "images/page-0002-figure-01.png",
    ]
    before = {name: (doc / name).read_bytes() for name in files}
    (doc / "doc.md").unlink()
    (doc / "doc.json").unlink()
    shutil.rmtree(doc / "images")
    report = render_folders([doc], OPTIONS)
    [r] = report.documents
    assert (r.status, r.source) == ("converted", str(pdf))
    assert (r.pages, r.pages_done, r.pages_reused) == (2, 2, 2)
    assert {name: (doc / name).read_bytes() for name in files} == before


def test_render_refuses_to_cut_images_from_a_changed_source(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 2)
    out = tmp_path / "out"
    Converter(ScriptedEngine(), ConvertSettings(output_dir=out, dpi=72, workers=1)).run([pdf])
    make_pdf(pdf, 2, "changed")
    report = render_folders([out / "doc"], OPTIONS)
    [r] = report.documents
    assert r.status == "failed" and r.error == (
        f"{pdf}: the source changed since {out / 'doc'} was converted"
    )
    assert (r.pages, r.pages_done, r.pages_reused) == (2, 2, 2)
    assert not (out / "doc" / "doc.md").exists()
    # Without images the source is not needed.
    report = render_folders([out / "doc"], RenderOptions(images=False))
    assert report.documents[0].status == "converted" and (out / "doc" / "doc.md").is_file()


def test_render_of_a_folder_without_pages_is_a_one_line_error(tmp_path: Path) -> None:
    pdf, folder, state = planned(tmp_path, 2)
    report = render_folders([Path(folder.location)], OPTIONS)
    [r] = report.documents
    assert (
        r.status == "failed" and r.error == f"{folder.location}: no page has a raw output to render"
    )
    assert (r.pages, r.pages_failed, r.pages_done) == (2, 2, 0)
    report = render_folders([tmp_path], OPTIONS)
    assert "not an hpdparse output folder" in report.documents[0].error
