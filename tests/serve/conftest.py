"""The document service's tests (test_serve_documents*.py) compare its files with one
`hpdparse convert` run of the same inputs with the same options, made once per test run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.convert_outputs import CONVERT_OPTIONS, run_convert
from tests.helpers.paths import SAMPLES
from tests.helpers.pdfs import join_pdfs

SAMPLE_FILES = ("report.pdf", "paper.pdf", "memo.pdf", "scan.png")


@pytest.fixture(scope="session")
def long_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PDF samples joined four times over: 24 pages (the restart tests' document)."""
    parts = [SAMPLES / name for name in SAMPLE_FILES[:3]] * 4
    return join_pdfs(tmp_path_factory.mktemp("inputs") / "long.pdf", parts)


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory, long_pdf: Path) -> Path:
    """convert's output folder for the samples and `long_pdf` (OUT/<stem>/ each)."""
    pytest.importorskip("docling_core")  # --docling, --chunks
    out = tmp_path_factory.mktemp("converted")
    inputs = [SAMPLES / name for name in SAMPLE_FILES] + [long_pdf]
    proc = run_convert(inputs, out, *CONVERT_OPTIONS, "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out
