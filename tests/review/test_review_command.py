"""`hpdparse review` without a browser: what it writes, its errors and exit codes, and the
MathML it lets through. Output folders come from the real convert against the fake server."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pymupdf
from click.testing import CliRunner

from hpdparse import api
from hpdparse.commands.main import main
from hpdparse.review.mathml import latex_to_mathml
from hpdparse.runner.progress import Progress
from tests.helpers.paths import REPO, SAMPLES

PASSWORD = "geheim"


def convert(srv, inputs, out: Path, **kw) -> None:
    report = api.convert(
        [str(i) for i in inputs], out, engine="openai", server=srv.url, dpi=72, workers=1,
        progress=Progress(), **kw,
    )  # fmt: skip
    assert report.exit_code == 0


def review_process(*args: str) -> subprocess.CompletedProcess:
    """`hpdparse review` as a user runs it: its own process (workers' output included)."""
    return subprocess.run(
        [sys.executable, "-m", "hpdparse", "review", *map(str, args)],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip


def review(*args: str) -> subprocess.CompletedProcess:
    """The same command in this process (its rasterizer pool starts from the preloaded
    forkserver, seconds faster than a new process); the first test runs it as a process."""
    result = CliRunner().invoke(main, ["review", *map(str, args)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_pages_and_index_for_a_run_rewritten_identically(srv, tmp_path: Path) -> None:
    out = tmp_path / "out"
    convert(srv, [SAMPLES / "paper.pdf", SAMPLES / "scan.png"], out)
    first = review_process(out)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert written == ["paper/paper.review.html", "review.html", "scan/scan.review.html"]
    index = (out / "review.html").read_text(encoding="utf-8")
    assert 'href="paper/paper.review.html"' in index and 'href="scan/scan.md"' in index
    page = (out / "paper" / "paper.review.html").read_text(encoding="utf-8")
    assert page.count("data:image/jpeg;base64,") == 2  # both page images, embedded
    assert page.count("data:image/png;base64,") == 1  # the figure crop
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # nothing from outside
    before = {p: p.read_bytes() for p in out.rglob("*.html")}
    assert review(out, "-q").returncode == 0
    assert {p: p.read_bytes() for p in out.rglob("*.html")} == before


def test_one_document_folder(srv, tmp_path: Path) -> None:
    convert(srv, [SAMPLES / "memo.pdf"], tmp_path)
    result = review(tmp_path / "memo")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "memo" / "memo.review.html").is_file()
    assert not (tmp_path / "memo" / "review.html").exists()
    assert "all documents" not in (tmp_path / "memo" / "memo.review.html").read_text("utf-8")


def test_a_folder_without_output_is_a_one_line_error(tmp_path: Path) -> None:
    result = review(tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path}: no hpdparse output folders in it (nothing to review)"
    ]
    assert review(tmp_path / "missing").returncode == 2


def test_a_moved_source_still_gets_its_page_without_images(srv, tmp_path: Path) -> None:
    source = tmp_path / "memo.pdf"
    shutil.copy(SAMPLES / "memo.pdf", source)
    out = tmp_path / "out"
    convert(srv, [source], out)
    source.unlink()
    result = review(out)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "source not found" in lines[0] and "without images" in lines[0]
    page = (out / "memo" / "memo.review.html").read_text(encoding="utf-8")
    assert "data:image/jpeg" not in page and "no page image" in page
    assert "Memo: Weekly Team Update" in page


def test_an_unfinished_document_is_shown_from_its_raw_pages(srv, tmp_path: Path) -> None:
    convert(srv, [SAMPLES / "report.pdf"], tmp_path)
    doc_dir = tmp_path / "report"
    (doc_dir / "report.md").unlink()  # as a run killed before the document was finished
    (doc_dir / "report.json").unlink()
    (doc_dir / "raw" / "page-0002.json").unlink()  # page 2 was not decoded yet
    assert review(tmp_path).returncode == 0
    page = (doc_dir / "report.review.html").read_text(encoding="utf-8")
    assert "<strong>unfinished</strong>" in page and "not decoded yet" in page
    assert "Data Systems Group" in page
    index = (tmp_path / "review.html").read_text(encoding="utf-8")
    assert "converted (unfinished)" in index


def test_an_encrypted_source_needs_the_password_for_its_images(srv, tmp_path: Path) -> None:
    source = tmp_path / "paper.pdf"
    with pymupdf.open(SAMPLES / "paper.pdf") as doc:
        doc.save(source, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=PASSWORD, owner_pw="o")
    out = tmp_path / "out"
    convert(srv, [source], out, password=PASSWORD)
    without = review(out)
    assert without.returncode == 1 and "a password is needed" in without.stderr
    with_password = review(out, "--password", PASSWORD)
    assert with_password.returncode == 0, with_password.stderr
    page = (out / "paper" / "paper.review.html").read_bytes()
    assert page.count(b"data:image/jpeg;base64,") == 2
    assert PASSWORD.encode() not in page


def test_mathml_keeps_mathml_only() -> None:
    assert "<mfrac>" in latex_to_mathml(r"\frac{a}{b}", display=True)
    # latex2mathml copies \text{} into the markup: a well-formed element there is dropped...
    hostile = latex_to_mathml(r"\text{<script>alert(1)</script>} + \href{javascript:x}{y}")
    assert hostile.startswith("<math") and "<mtext>alert(1)</mtext>" in hostile
    assert "<script" not in hostile and "href" not in hostile and "javascript" not in hostile
    # ... and markup that is not well-formed shows the LaTeX as code.
    broken = latex_to_mathml(r"\text{<img src=x onerror=alert(2)>}")
    assert broken.startswith('<code class="tex">') and "<img" not in broken
