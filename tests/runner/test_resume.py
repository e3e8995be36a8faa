"""Resume: finished work stays finished, through reruns, setting changes, Ctrl-C and kill -9."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpdparse import api
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.progress import Progress
from hpdparse.sources.rasterize import rasterize_page
from hpdparse.store.output_store import open_document_folder
from tests.helpers.fakeserver import AnswerGate, FakeHPDServer, image_fingerprint
from tests.helpers.paths import REPO
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.pdfs import make_pdf

DPI = 72


def fingerprint(pdf: Path, number: int) -> str:
    return image_fingerprint(rasterize_page(str(pdf), number, DPI)[0])


def convert(srv: FakeHPDServer, inputs, out: Path, **kw):
    kw.setdefault("dpi", DPI)
    kw.setdefault("workers", 2)
    return api.convert(inputs, out, engine="openai", server=srv.url, progress=Progress(), **kw)


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file of an output tree except those holding timings (raw page metadata and the
    document JSON), plus the raw page metadata without its timing field."""
    files = {}
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(out))
        if path.suffix == ".json" and path.parent.name == "raw" and path.name != "document.json":
            meta = json.loads(path.read_text())
            meta.pop("seconds")
            files[rel] = json.dumps(meta, sort_keys=True).encode()
        elif path.suffix == ".json" and path.parent.name != "raw":
            files[rel] = b"(present)"
        else:
            files[rel] = path.read_bytes()
    return files


def test_rerun_changes(srv: FakeHPDServer, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 4)
    out = tmp_path / "out"
    assert convert(srv, [pdf], out).exit_code == 0
    md = out / "doc" / "doc.md"
    assert srv.chat_count == 4

    # Same command: skipped, nothing sent.
    srv.clear_log()
    report = convert(srv, [pdf], out)
    assert report.documents[0].status == "skipped" and srv.chat_count == 0

    # Only the Markdown missing (killed before the last write): rebuilt from raw/, nothing sent.
    md.unlink()
    report = convert(srv, [pdf], out)
    assert report.documents[0].status == "converted" and srv.chat_count == 0 and md.is_file()
    assert report.documents[0].pages_reused == 4

    # Other render options: re-rendered from raw/, nothing sent.
    report = convert(srv, [pdf], out, render_options=RenderOptions(keep_headers=True))
    assert report.documents[0].status == "converted" and srv.chat_count == 0

    # A finished document is not looked into; in an unfinished one, a damaged raw page is
    # decoded again, alone.
    (out / "doc" / "raw" / "page-0002.txt").write_text("truncated")
    report = convert(srv, [pdf], out, render_options=RenderOptions(keep_headers=True))
    assert report.documents[0].status == "skipped" and srv.chat_count == 0
    md.unlink()
    report = convert(srv, [pdf], out, render_options=RenderOptions(keep_headers=True))
    assert srv.fingerprints() == [fingerprint(pdf, 2)]

    # Another dpi or max_tokens: the saved pages do not fit, everything is decoded again.
    srv.clear_log()
    convert(srv, [pdf], out, dpi=DPI + 8)
    assert srv.chat_count == 4
    srv.clear_log()
    convert(srv, [pdf], out, dpi=DPI + 8, max_tokens=4000)
    assert srv.chat_count == 4

    # --overwrite redoes everything.
    srv.clear_log()
    report = convert(srv, [pdf], out, overwrite=True)
    assert srv.chat_count == 4 and report.documents[0].pages_reused == 0

    # A new page range: only the pages not yet saved are sent.
    srv.clear_log()
    convert(srv, [pdf], out, pages="1-2")
    assert srv.chat_count == 0
    pdf2 = make_pdf(tmp_path / "in2" / "doc.pdf", 6)
    # The source changed under the same path: nothing of it is reused.
    os.replace(pdf2, pdf)
    srv.clear_log()
    report = convert(srv, [pdf], out)
    assert srv.chat_count == 6 and report.documents[0].pages_reused == 0


def _cli(out: Path, pdf: Path, url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hpdparse",
        "convert",
        str(pdf),
        "-o",
        str(out),
        "--engine",
        "openai",
        "--server",
        url,
        "--dpi",
        str(DPI),
        "--batch-size",
        "3",
        "--workers",
        "1",
    ]


def _valid_pages(doc_dir: Path, pages: int) -> set[int]:
    folder = open_document_folder(doc_dir)
    return {n for n in range(1, pages + 1) if folder.read_raw_page(n) is not None}


def _run_until(
    cmd: list[str], doc_dir: Path, pages: int, at_least: int, sig: int, gate: AnswerGate
):
    """Run `cmd` until `at_least` pages of `doc_dir` are saved, then send it `sig`; the
    server's `gate` holds every further answer until then, so the signal lands mid-run however
    fast or loaded the machine is."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + PATIENCE_SECONDS
    try:
        while len(_valid_pages(doc_dir, pages)) < at_least:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, workers included
        else:
            proc.send_signal(sig)
        gate.open()
        out, err = proc.communicate(timeout=PATIENCE_SECONDS)
    finally:
        gate.open()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


@pytest.mark.slow
def test_kill_9_and_ctrl_c_then_rerun_match_an_uninterrupted_run(
    srv: FakeHPDServer, tmp_path: Path
) -> None:
    pages = 24
    pdf = make_pdf(tmp_path / "in" / "long.pdf", pages, "long")
    fingerprints = {n: fingerprint(pdf, n) for n in range(1, pages + 1)}
    reference = tmp_path / "reference"
    assert convert(srv, [pdf], reference).exit_code == 0

    out = tmp_path / "out"
    doc_dir = out / "long"
    # kill -9 twice at different points, then Ctrl-C once; each run gets the answers it needs
    # to reach its point, the others wait.
    # Each run asks a server of its own: a request the killed run had sent could otherwise reach
    # the shared server after the next run's gate was set, take one of its free answers and
    # leave the next run a page short of its point (seen once in CI: "no progress" for 900 s).
    for at_least, sig in ((3, signal.SIGKILL), (8, signal.SIGKILL), (13, signal.SIGINT)):
        valid = _valid_pages(doc_dir, pages)
        finished_before = {fingerprints[n] for n in valid}
        gate = AnswerGate(free=at_least - len(valid), limit=PATIENCE_SECONDS)
        with FakeHPDServer(delay=gate) as own:
            code, _, err = _run_until(_cli(out, pdf, own.url), doc_dir, pages, at_least, sig, gate)
            sent = own.fingerprints()
        # No page finished in an earlier run was sent again.
        assert not finished_before & set(sent)
        if sig == signal.SIGINT:
            assert code == 130, err
            assert "Traceback" not in err
        assert not (doc_dir / "long.md").exists()
    done = _valid_pages(doc_dir, pages)
    assert len(done) >= 13

    with FakeHPDServer() as own:
        final = subprocess.run(
            _cli(out, pdf, own.url), capture_output=True, text=True, cwd=REPO,
            timeout=PATIENCE_SECONDS,
        )  # fmt: skip
        resent = set(own.fingerprints())
    assert final.returncode == 0, final.stderr
    assert "Traceback" not in final.stderr
    assert resent == {fingerprints[n] for n in range(1, pages + 1) if n not in done}
    assert snapshot(out) == snapshot(reference)


def test_sigterm_stops_cleanly_and_kill_9_leaves_no_worker_behind(
    srv: FakeHPDServer, tmp_path: Path
) -> None:
    psutil = pytest.importorskip("psutil")

    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 12, "term")
    out = tmp_path / "out"
    srv.delay = gate = AnswerGate(free=2, limit=PATIENCE_SECONDS)
    code, _, err = _run_until(_cli(out, pdf, srv.url), out / "doc", 12, 2, signal.SIGTERM, gate)
    assert code == 130 and "Traceback" not in err
    assert len(_valid_pages(out / "doc", 12)) >= 2

    # kill -9 of the main process alone: its rasterizer processes must not live on. The run
    # asks a server of its own, whose one free answer no late request of the first run can take.
    gate = AnswerGate(free=1, limit=PATIENCE_SECONDS)
    own = FakeHPDServer(delay=gate).start()
    proc = subprocess.Popen(
        _cli(tmp_path / "out2", pdf, own.url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while len(_valid_pages(tmp_path / "out2" / "doc", 12)) < 1:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children  # the forkserver and the rasterizer
        proc.kill()
        proc.wait()
        gone, alive = psutil.wait_procs(children, timeout=PATIENCE_SECONDS)
        assert not alive, alive
    finally:
        gate.open()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        own.stop()
