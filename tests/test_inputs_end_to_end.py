"""`hpdparse convert` on inputs beyond PDF, as a user runs it, with the torch engine on the tiny
checkpoint: a DOCX (converted by the real LibreOffice, in the rasterizer processes), an EPUB and
a damaged DOCX in one batch; then the same batch again (resume); then a DOCX where LibreOffice is
not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest

from hpdparse.sources.office import soffice_command
from tests.helpers.documents import libreoffice_convert, make_epub
from tests.helpers.paths import REPO, TINY

pytestmark = pytest.mark.skipif(
    soffice_command() is None,
    reason="LibreOffice is not installed (.ci/install-test-tools.sh installs it)",
)

HTML = (
    "<html><body><h1>Annual report</h1><p>The first page.</p>"
    '<h2 style="page-break-before: always">Results</h2><p>The second page.</p></body></html>'
)


def _convert(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hpdparse", "convert", *map(str, args)]
    command += ["--engine", "torch", "--model", str(TINY), "--dpi", "72", "--workers", "2"]
    command += ["--max-tokens", "96", "--quiet"]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, cwd=REPO, check=False
    )


def _statuses(report: Path) -> dict[str, str]:
    documents = json.loads(report.read_text())["documents"]
    return {Path(d["source"]).name: d["status"] for d in documents}


def test_office_and_epub_inputs_convert_resume_and_fail_cleanly(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    html = tmp_path / "annual.html"
    html.write_text(HTML, encoding="utf-8")
    inputs = tmp_path / "in"
    (docx,) = libreoffice_convert([html], "docx:MS Word 2007 XML", inputs, tmp_path / "profile")
    epub = make_epub(inputs / "book.epub", ["A short chapter.", "Another."])
    bad = inputs / "broken.docx"
    bad.write_bytes(b"this is not a word document\n" * 20)
    out, report = tmp_path / "out", tmp_path / "report.json"
    scratch = tmp_path / "tmp"  # the run's temporary folders go here (torch leaves its own)
    scratch.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}

    args = (docx, epub, bad, "-o", out, "--pages", "2-", "--keep-converted-pdf")
    first = _convert(*args, "--report", report, env=env)
    assert first.returncode == 1, first.stderr
    assert "Traceback" not in first.stderr
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {bad}: not a valid DOCX file (damaged, or another format)"]
    assert _statuses(report) == {
        "annual.docx": "converted",
        "book.epub": "converted",
        "broken.docx": "failed",
    }
    folder = out / "annual"
    assert (folder / "annual.md").is_file()
    assert sorted(p.name for p in (folder / "raw").glob("page-*.txt")) == ["page-0002.txt"]
    state = json.loads((folder / "raw" / "document.json").read_text())
    assert state["page_count"] == 2 and state["selected_pages"] == [2]
    with pymupdf.open(folder / "annual.converted.pdf") as kept:
        assert kept.page_count == 2 and "Results" in kept[1].get_text()
    assert list(scratch.glob("hpdparse-*")) == []  # the conversion folder is gone

    again = _convert(*args, "--report", report, env=env)
    assert again.returncode == 1, again.stderr
    assert _statuses(report) == {
        "annual.docx": "skipped",
        "book.epub": "skipped",
        "broken.docx": "failed",
    }

    # Without LibreOffice: one line naming what to install; the EPUB still converts.
    no_office = {**env, "PATH": str(tmp_path / "no-bin")}
    other = tmp_path / "other.docx"
    other.write_bytes(docx.read_bytes())
    last = _convert(other, epub, "-o", tmp_path / "out2", "--report", report, env=no_office)
    assert last.returncode == 1, last.stderr
    errors = [line for line in last.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {other}: LibreOffice is needed for .docx files: install it (Debian/Ubuntu: "
        "apt-get install libreoffice-writer-nogui; elsewhere: https://www.libreoffice.org/download)"
    ]
    assert _statuses(report) == {"other.docx": "failed", "book.epub": "converted"}
    assert (tmp_path / "out2" / "book" / "book.md").is_file()
