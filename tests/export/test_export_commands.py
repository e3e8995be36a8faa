"""--docling and --chunks through the real commands: `convert` (openai engine against the fake
HPD server) on the samples and a few shared-corpus files, `render` rebuilding both from raw/,
`--overwrite` and a render without the flags removing them, the missing extra as a usage error,
and LangChain's docling loader reading `<stem>.docling.json`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("docling_core")

from docling_core.types.doc import DoclingDocument

from hpdparse.hpd.stream import BlockRef
from tests.export.test_chunker import assert_same_chunks, oracle_triples
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import REPO

SAMPLES = [REPO / "samples" / name for name in ("report.pdf", "memo.pdf", "scan.png")]
CORPUS_FILES = ["pdfjs__tracemonkey.pdf", "plumber__ca-warn-report.pdf", "pdfjs__TAMReview.pdf"]
TIMEOUT = 600


def hpdparse(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "hpdparse", *args, "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def convert(server: FakeHPDServer, inputs: list[Path], out: Path, *extra: str):
    return hpdparse(
        "convert", *map(str, inputs), "-o", str(out), "--engine", "openai", "--server",
        server.url, "--dpi", "72", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def samples_out(server: FakeHPDServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    proc = convert(server, SAMPLES, out, "--docling", "--chunks", "--chunk-tokens", "128")
    assert proc.returncode == 0, proc.stderr
    return out


def files_of(folder: Path) -> tuple[Path, Path]:
    return folder / f"{folder.name}.docling.json", folder / f"{folder.name}.chunks.jsonl"


def read_chunks(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_document_folder(folder: Path, limit: int) -> None:
    """The checks of tests/export on a real output folder: it validates, boxes lie inside their
    pages, chunks hold every block of the DoclingDocument's body at most once and stay under
    the limit unless oversize, merged blocks carry both pages; the chunks written are those
    docling-core's HybridChunker makes of the DoclingDocument written."""
    docling_path, chunks_path = files_of(folder)
    doc = DoclingDocument.load_from_json(docling_path)
    assert_same_chunks(doc, limit)
    oracle = oracle_triples(doc, limit)
    written = read_chunks(chunks_path)
    assert [r["text"] for r in written] == [text.strip() for text, _, _ in oracle]
    assert [r["headings"] for r in written] == [headings or [] for _, _, headings in oracle]
    data = json.loads((folder / f"{folder.name}.json").read_text(encoding="utf-8"))
    for item, _ in doc.iterate_items():
        for prov in getattr(item, "prov", []):
            size = doc.pages[prov.page_no].size
            assert 0 <= prov.bbox.l <= prov.bbox.r <= size.width + 1e-6
            assert 0 <= prov.bbox.b <= prov.bbox.t <= size.height + 1e-6
    seen: set[BlockRef] = set()
    for record in read_chunks(chunks_path):
        refs = {BlockRef(b["page"], b["block"]) for b in record["blocks"]}
        assert not refs & seen
        seen |= refs
        assert record["tokens"] <= limit or record["oversize"]
        assert record["pages"] == sorted({r.page for r in refs})
    for merge in data["merges"]:
        first = BlockRef(merge["first"]["page"], merge["first"]["block"])
        second = BlockRef(merge["second"]["page"], merge["second"]["block"])
        assert first in seen and second in seen


def test_convert_writes_both_files_for_every_sample(samples_out: Path) -> None:
    for folder in sorted(p for p in samples_out.iterdir() if p.is_dir()):
        check_document_folder(folder, 128)
    records = read_chunks(files_of(samples_out / "report")[1])
    merged = [r for r in records if len(r["pages"]) > 1]
    assert merged, "report.pdf has a paragraph and a table continued on the next page"
    data = json.loads((samples_out / "report" / "report.docling.json").read_text())
    pages_of_items = [
        [p["page_no"] for p in item["prov"]] for item in data["texts"] + data["tables"]
    ]
    assert [1, 2] in pages_of_items and [2, 3] in pages_of_items


def test_chunk_blocks_carry_the_blocks_confidence(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with FakeHPDServer(logprob=lambda request: -0.05) as confident:
        assert convert(confident, SAMPLES[1:2], out, "--chunks").returncode == 0
    data = json.loads((out / "memo" / "memo.json").read_text(encoding="utf-8"))
    confidence = {
        (page["number"], block["index"]): block["confidence"]
        for page in data["pages"]
        for block in page["blocks"]
    }
    blocks = [b for r in read_chunks(files_of(out / "memo")[1]) for b in r["blocks"]]
    assert blocks
    for block in blocks:
        assert block["confidence"] is not None
        assert block["confidence"] == confidence[block["page"], block["block"]]


def test_render_rebuilds_the_same_files(samples_out: Path, tmp_path: Path) -> None:
    folder = tmp_path / "report"
    shutil.copytree(samples_out / "report", folder)
    before = [p.read_bytes() for p in files_of(folder)]
    for path in files_of(folder):
        path.unlink()
    proc = hpdparse("render", str(folder), "--docling", "--chunks", "--chunk-tokens", "128")
    assert proc.returncode == 0, proc.stderr
    assert [p.read_bytes() for p in files_of(folder)] == before
    proc = hpdparse("render", str(folder))  # without the flags: no stale exports
    assert proc.returncode == 0, proc.stderr
    assert not any(p.exists() for p in files_of(folder))


def test_overwrite_removes_the_exports(server: FakeHPDServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert convert(server, SAMPLES[1:2], out, "--docling", "--chunks").returncode == 0
    assert all(p.is_file() for p in files_of(out / "memo"))
    assert convert(server, SAMPLES[1:2], out, "--overwrite").returncode == 0
    assert (out / "memo" / "memo.md").is_file()
    assert not any(p.exists() for p in files_of(out / "memo"))


def test_a_missing_extra_is_a_usage_error(tmp_path: Path) -> None:
    # docling_core made unimportable in the child only, as when the extra is not installed.
    code = (
        "import sys; sys.modules['docling_core'] = None; from hpdparse.commands.main import main; "
        f"sys.argv = ['hpdparse', 'render', {str(tmp_path)!r}, '--docling']; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=TIMEOUT
    )
    assert proc.returncode == 2
    assert "pip install 'hpdparse[docling]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_langchain_reads_the_docling_json_with_page_metadata(samples_out: Path) -> None:
    """LangChain's DoclingLoader opens `<stem>.docling.json` through docling's JSON backend and
    chunks it with our chunker (its default tokenizer would need a download)."""
    pytest.importorskip("langchain_docling")
    from langchain_docling import DoclingLoader
    from langchain_docling.loader import ExportType

    from hpdparse.export.docling_chunker import make_chunker

    path = files_of(samples_out / "report")[0]
    loader = DoclingLoader(
        file_path=str(path), export_type=ExportType.DOC_CHUNKS, chunker=make_chunker(128, None)
    )
    documents = loader.load()
    assert documents
    pages = set()
    for document in documents:
        for item in document.metadata["dl_meta"]["doc_items"]:
            pages.update(p["page_no"] for p in item["prov"])
    assert pages == {1, 2, 3}
    text = "\n".join(d.page_content for d in documents)
    assert "Counts by group" in text and "Annual Report on Data Quality" in text


@pytest.mark.slow
def test_corpus_files_export(server: FakeHPDServer, corpus_dir: Path, tmp_path: Path) -> None:
    files = [corpus_dir / name for name in CORPUS_FILES if (corpus_dir / name).is_file()]
    if not files:
        pytest.skip("none of the chosen corpus files is present")
    out = tmp_path / "out"
    proc = convert(server, files, out, "--pages", "1-4", "--docling", "--chunks")
    assert proc.returncode == 0, proc.stderr
    for path in files:
        check_document_folder(out / path.stem, 512)
