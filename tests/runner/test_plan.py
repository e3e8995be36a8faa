"""Planning a document: claim its folder, keep the saved pages that fit, skip it when finished
with the same settings; errors name the file or folder. No engine, no worker processes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hpdparse.engines.base import PageResult
from hpdparse.errors import InputError, OutputError
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.finish import DocumentFinish
from hpdparse.runner.images import ImageWork
from hpdparse.runner.plan import plan_document
from hpdparse.runner.settings import ConvertSettings
from hpdparse.sources.document import PageGeometry
from hpdparse.sources.page_ranges import parse_page_ranges
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.raw_pages import RawPage
from hpdparse.store.report import DocumentReport
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import SCRIPTED_INFO

PAGE = PageGeometry(595, 842, 72, None, 595.0, 842.0)


def settings(tmp_path: Path, **kw) -> ConvertSettings:
    return ConvertSettings(output_dir=tmp_path / "out", dpi=72, **kw)


def save(folder: DocumentFolder, number: int, requested_dpi: int = 72) -> None:
    result = PageResult((0, number), f"<BLOCK>text [1, 2, 300, 40]<CHILD>page {number}", "stop")
    reuse = SCRIPTED_INFO.reuse_key_at(requested_dpi)
    folder.write_raw_page(RawPage(number, result, PAGE, SCRIPTED_INFO, reuse))


def test_a_new_document_claims_its_folder(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    folder = open_document_folder(tmp_path / "out" / "doc")
    plan = plan_document(
        folder, pdf, settings(tmp_path, pages=parse_page_ranges("2-")), SCRIPTED_INFO
    )
    assert not plan.skip and plan.to_decode == [2, 3] and plan.reused == 0
    saved = folder.load_state()
    assert saved == plan.state and saved.status == "in-progress"
    assert (saved.selected, saved.page_count, saved.pages_spec, saved.dpi) == ([2, 3], 3, "2-", 72)
    assert saved.reuse_key == SCRIPTED_INFO.reuse_key() and saved.source.path == str(pdf)


def test_saved_pages_that_fit_are_kept_and_the_others_removed(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 4)
    folder = open_document_folder(tmp_path / "out" / "doc")
    s = settings(tmp_path)
    plan_document(folder, pdf, s, SCRIPTED_INFO)
    save(folder, 1)
    save(folder, 2, requested_dpi=100)  # another --dpi: does not fit
    save(folder, 3)
    (tmp_path / "out" / "doc" / "raw" / "page-0003.txt").write_text("damaged")
    plan = plan_document(folder, pdf, s, SCRIPTED_INFO)
    assert plan.to_decode == [2, 3, 4] and plan.reused == 1
    assert folder.saved_page_numbers() == [1]
    assert not (tmp_path / "out" / "doc" / "raw" / "page-0003.txt").exists()
    # Another model: nothing fits.
    other = dataclasses.replace(SCRIPTED_INFO, model="other")
    assert plan_document(folder, pdf, s, other).to_decode == [1, 2, 3, 4]


def test_a_finished_document_is_skipped_until_a_setting_changes(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 2)
    folder = open_document_folder(tmp_path / "out" / "doc")
    s = settings(tmp_path)
    plan = plan_document(folder, pdf, s, SCRIPTED_INFO)
    for number in plan.to_decode:
        save(folder, number)
    report = DocumentReport(source=str(pdf))
    cutter = ImageWork(None)
    finished = DocumentFinish(
        folder, plan.state, s.render_options, cutter, report
    ).start_converted()()
    assert finished.status == "converted"
    again = plan_document(folder, pdf, s, SCRIPTED_INFO)
    assert again.skip and again.reused == 2 and again.state == folder.load_state()
    # Other render options: re-rendered from the saved pages (nothing to decode).
    keep = settings(tmp_path, render_options=RenderOptions(keep_headers=True))
    plan = plan_document(folder, pdf, keep, SCRIPTED_INFO)
    assert not plan.skip and plan.to_decode == [] and plan.reused == 2
    assert not folder.has_markdown("doc")  # unfinished from now on
    # --overwrite: everything goes.
    plan = plan_document(folder, pdf, settings(tmp_path, overwrite=True), SCRIPTED_INFO)
    assert plan.to_decode == [1, 2] and folder.saved_page_numbers() == []


def test_errors_name_the_file_or_folder(tmp_path: Path) -> None:
    folder = open_document_folder(tmp_path / "out" / "doc")
    missing = tmp_path / "gone:1.pdf"
    with pytest.raises(InputError) as info:
        plan_document(folder, missing, settings(tmp_path), SCRIPTED_INFO)
    assert str(info.value) == f"{missing}: no such file" and info.value.path == str(missing)
    pdf = make_pdf(tmp_path / "doc.pdf", 2)
    with pytest.raises(InputError) as info:
        plan_document(folder, pdf, settings(tmp_path, pages=parse_page_ranges("5-")), SCRIPTED_INFO)
    assert "no page in --pages 5- (the document has 2 pages)" in str(info.value)
    assert info.value.path == str(pdf)
    (tmp_path / "blocked").write_text("a file where the folder should go")
    blocked = open_document_folder(tmp_path / "blocked" / "doc")
    with pytest.raises(OutputError) as info:
        plan_document(blocked, pdf, settings(tmp_path), SCRIPTED_INFO)
    assert "cannot write the output folder" in str(info.value)
    assert info.value.path == str(tmp_path / "blocked" / "doc")
