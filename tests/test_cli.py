"""`hpdparse convert` and `hpdparse render` as a user runs them, against the fake HPD server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdparse.commands.main import main
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import REPO, SAMPLES
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.pdfs import make_pdf


def run(srv: FakeHPDServer | None, *args: str | Path):
    """Run `hpdparse convert ...` (or another command when args start with one) in-process."""
    argv = [str(a) for a in args]
    if argv[0] not in ("convert", "render"):
        argv = ["convert", *argv]
    if argv[0] == "convert" and srv is not None:
        argv += ["--engine", "openai", "--server", srv.url, "--dpi", "72", "--workers", "2"]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def test_help_documents_options_and_exit_codes() -> None:
    result = CliRunner().invoke(main, ["convert", "--help"], terminal_width=100)
    assert result.exit_code == 0
    text = result.output
    for option in (
        "--output", "--recursive", "--pages", "--dpi", "--password", "--engine", "--model",
        "--server", "--batch-size", "--no-fork", "--no-mtp", "--speculative-tokens",
        "--max-tokens", "--device", "--dtype", "--skip-existing", "--overwrite", "--keep-headers",
        "--no-images", "--table-format", "--math", "--page-markers", "--no-merge-paragraphs",
        "--no-merge-tables", "--report", "--quiet", "--verbose", "--convert-timeout",
        "--keep-converted-pdf",
    ):  # fmt: skip
        assert option in text, option
    assert "1-based" in text
    assert "Exit codes: 0" in " ".join(text.split()) and "2 usage error" in " ".join(text.split())
    render_help = CliRunner().invoke(main, ["render", "--help"])
    assert render_help.exit_code == 0 and "raw/" in render_help.output


@pytest.mark.parametrize(
    "args",
    [
        ["convert"],
        ["convert", "x.pdf", "--dpi", "abc"],
        ["convert", "x.pdf", "--pages", "3-1"],
        ["convert", "x.pdf", "--pages", "0"],
        ["convert", "x.pdf", "--engine", "nope"],
        ["convert", "x.pdf", "--no-such-option"],
        ["convert", "x.pdf", "--batch-size", "0"],
        ["convert", "x.pdf", "--quiet", "--verbose"],
        ["convert", "x.pdf", "--ray-actors", "2"],
        ["convert", "x.pdf", "--ray-cpus-per-actor", "2"],
        ["convert", "x.pdf", "--text-layer", "sometimes"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output


def test_convert_exit_0_then_skip(srv: FakeHPDServer, tmp_path: Path) -> None:
    result = run(srv, SAMPLES / "memo.pdf", SAMPLES / "scan.png", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "memo" / "memo.md").is_file() and (tmp_path / "scan" / "scan.md").is_file()
    assert "2 converted" in result.stdout and result.stderr.count("error") == 0
    # The fake server answers without log-probabilities: one warning line for the run.
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "answered without log-probabilities" in warnings[0], warnings
    sent = srv.chat_count
    again = run(srv, SAMPLES / "memo.pdf", SAMPLES / "scan.png", "-o", tmp_path)
    assert again.exit_code == 0 and "2 skipped" in again.stdout
    assert srv.chat_count == sent


def test_bad_file_in_batch_exits_1_with_one_line_error(srv: FakeHPDServer, tmp_path: Path) -> None:
    bad = tmp_path / "in" / "broken.pdf"
    bad.parent.mkdir()
    bad.write_bytes(b"%PDF-1.7\nnothing else")
    good = make_pdf(tmp_path / "in" / "good.pdf")
    result = run(srv, bad, good, "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 1
    assert result.stdout == ""  # --quiet: nothing but errors
    errors = [line for line in result.stderr.splitlines() if line]
    assert len(errors) == 1 and "broken.pdf" in errors[0] and errors[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    assert (tmp_path / "out" / "good" / "good.md").is_file()
    assert not (tmp_path / "out" / "broken").exists()


def test_missing_engine_dependency_is_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['vllm'] = None; sys.modules['torch'] = None\n"
        "from hpdparse.commands.main import main; main()"
    )
    for engine, words in (("vllm", "needs vLLM: pip install"), ("torch", "needs PyTorch")):
        proc = subprocess.run(
            [sys.executable, "-c", code, "convert", str(SAMPLES / "memo.pdf"), "-o", str(tmp_path)]
            + (["--engine", engine] if engine != "vllm" else []),
            capture_output=True,
            text=True,
            timeout=PATIENCE_SECONDS,
        )
        assert proc.returncode == 1, proc.stderr
        assert words in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_passwords(srv: FakeHPDServer, tmp_path: Path) -> None:
    locked = make_pdf(tmp_path / "in" / "locked.pdf", password="sésame")
    out = tmp_path / "out"
    result = run(srv, locked, "-o", out)
    assert result.exit_code == 1 and "password" in result.stderr and "locked.pdf" in result.stderr
    wrong = run(srv, locked, "-o", out, "--password", "nope")
    assert wrong.exit_code == 1 and "wrong password" in wrong.stderr
    assert not (out / "locked").exists()
    right = run(srv, locked, "-o", out, "--password", "sésame")
    assert right.exit_code == 0, right.output
    assert len(list((out / "locked" / "raw").glob("page-*.txt"))) == 2
    # render needs the password again to cut images: it is never stored.
    state = json.loads((out / "locked" / "raw" / "document.json").read_text())
    assert "sésame" not in json.dumps(state, ensure_ascii=False)


def test_folders_recursion_and_globs(srv: FakeHPDServer, tmp_path: Path) -> None:
    make_pdf(tmp_path / "in" / "top.pdf", 1, "top")
    make_pdf(tmp_path / "in" / "sub" / "deep.pdf", 1, "deep")
    (tmp_path / "in" / "notes.txt").write_text("ignored")
    flat = run(srv, tmp_path / "in", "-o", tmp_path / "flat")
    assert flat.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "flat").iterdir()) == ["top"]
    deep = run(srv, tmp_path / "in", "-r", "-o", tmp_path / "deep")
    assert deep.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["deep", "top"]
    globbed = run(srv, str(tmp_path / "in" / "*" / "*.pdf"), "-o", tmp_path / "glob")
    assert globbed.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "glob").iterdir()) == ["deep"]
    nothing = run(srv, str(tmp_path / "in" / "*.docx"), "-o", tmp_path / "none")
    assert nothing.exit_code == 1 and "matches" in nothing.stderr


def test_duplicate_stems_get_distinct_folders(srv: FakeHPDServer, tmp_path: Path) -> None:
    a = make_pdf(tmp_path / "a" / "x.pdf", 1, "first")
    b = make_pdf(tmp_path / "b" / "x.pdf", 1, "second")
    out = tmp_path / "out"
    result = run(srv, b, a, "-o", out)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names[0] == "x" and names[1].startswith("x-") and len(names) == 2
    sources = {
        n: json.loads((out / n / "raw" / "document.json").read_text())["source"] for n in names
    }
    assert sources["x"] == str(a)  # a sorts first
    assert (out / names[1] / f"{names[1]}.md").is_file()
    srv.clear_log()
    again = run(srv, b, "-o", out)  # b alone still finds its own folder
    assert again.exit_code == 0 and srv.chat_count == 0 and "1 skipped" in again.stdout


def test_report_content(srv: FakeHPDServer, tmp_path: Path) -> None:
    good = make_pdf(tmp_path / "in" / "good.pdf", 3)
    bad = tmp_path / "in" / "bad.pdf"
    bad.write_text("nope")
    report_file = tmp_path / "reports" / "run.json"
    result = run(srv, good, bad, "-o", tmp_path / "out", "--report", report_file)
    assert result.exit_code == 1
    report = json.loads(report_file.read_text())
    assert report["exit_code"] == 1 and report["engine"] == "openai"
    assert report["totals"]["converted"] == 1 and report["totals"]["failed"] == 1
    assert report["totals"]["pages_decoded"] == 3 and report["pages_per_second"] > 0
    assert report["output_tokens_per_second"] > 0
    docs = {Path(d["source"]).name: d for d in report["documents"]}
    assert docs["good.pdf"]["status"] == "converted" and docs["good.pdf"]["pages_done"] == 3
    assert docs["good.pdf"]["output_dir"] == str(tmp_path / "out" / "good")
    assert docs["good.pdf"]["seconds"] >= 0 and docs["good.pdf"]["output_tokens"] > 0
    assert docs["bad.pdf"]["status"] == "failed" and "bad.pdf" in docs["bad.pdf"]["error"]
    assert docs["bad.pdf"]["output_dir"] is None


def test_render_reproduces_convert(srv: FakeHPDServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(srv, SAMPLES / "paper.pdf", SAMPLES / "report.pdf", "-o", out)
    assert result.exit_code == 0, result.output
    before = {p: (out / p / f"{p}.md").read_bytes() for p in ("paper", "report")}
    images_before = sorted(str(p.relative_to(out)) for p in out.rglob("images/*"))
    for p in before:
        (out / p / f"{p}.md").unlink()
        (out / p / f"{p}.json").unlink()
        shutil.rmtree(out / p / "images", ignore_errors=True)
    srv.clear_log()
    rendered = run(None, "render", out / "paper", out / "report")
    assert rendered.exit_code == 0, rendered.output
    assert srv.chat_count == 0
    for p, md in before.items():
        assert (out / p / f"{p}.md").read_bytes() == md
        assert (out / p / f"{p}.json").is_file()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("images/*")) == images_before
    # A folder that is not a conversion is a one-line error.
    (tmp_path / "empty").mkdir()
    bad = run(None, "render", tmp_path / "empty")
    assert bad.exit_code == 1 and "not an hpdparse output folder" in bad.stderr


def test_unwritable_output_folder_fails_that_document(srv: FakeHPDServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "blocked").write_text("a file where the folder should go")
    blocked = make_pdf(tmp_path / "in" / "blocked.pdf", 1, "blocked")
    fine = make_pdf(tmp_path / "in" / "fine.pdf", 1, "fine")
    result = run(srv, blocked, fine, "-o", out)
    assert result.exit_code == 1
    assert "cannot write the output folder" in result.stderr and "blocked" in result.stderr
    assert (out / "fine" / "fine.md").is_file()
    if os.geteuid() != 0:  # root writes anywhere: read-only modes mean nothing to it
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            denied = run(srv, fine, "-o", ro)
            assert denied.exit_code == 1 and "permission denied" in denied.stderr.lower()
        finally:
            ro.chmod(0o755)


def test_server_down_is_one_line_error(tmp_path: Path) -> None:
    with FakeHPDServer() as dead:
        url = dead.url
    pdf = make_pdf(tmp_path / "doc.pdf")
    result = CliRunner().invoke(
        main, ["convert", str(pdf), "-o", str(tmp_path / "out"), "--engine", "openai",
               "--server", url, "--dpi", "72"],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "cannot reach HPD server" in result.stderr and "Traceback" not in result.stderr
    assert "1 failed" in result.stdout


def test_python_module_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hpdparse", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=PATIENCE_SECONDS,
    )
    assert proc.returncode == 0 and "hpdparse" in proc.stdout


def test_terminal_gets_rich_progress_and_table(srv: FakeHPDServer, tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    cmd = [sys.executable, "-m", "hpdparse", "convert", str(SAMPLES / "memo.pdf"), "-o",
           str(tmp_path), "--engine", "openai", "--server", srv.url, "--dpi", "72"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(cmd, stdout=follower, stderr=follower, cwd=REPO, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=PATIENCE_SECONDS) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "documents" in text and "pages" in text  # the progress bars
    assert "converted" in text and "memo.pdf" in text  # the summary table
    assert "Traceback" not in text


def test_default_output_is_the_current_folder(
    srv: FakeHPDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(SAMPLES / "memo.pdf", tmp_path / "paper.pdf")
    monkeypatch.chdir(tmp_path)
    result = run(srv, "paper.pdf")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "paper" / "paper.md").is_file()


def test_engine_that_cannot_start_still_writes_the_report(tmp_path: Path) -> None:
    code = "import sys; sys.modules['vllm'] = None\nfrom hpdparse.commands.main import main; main()"
    report_file = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-c", code, "convert", str(SAMPLES / "memo.pdf"), "-o", str(tmp_path),
         "--report", str(report_file)],
        capture_output=True, text=True, timeout=PATIENCE_SECONDS,
    )  # fmt: skip
    assert proc.returncode == 1
    report = json.loads(report_file.read_text())
    assert "needs vLLM" in report["engine_error"] and report["exit_code"] == 1
    assert report["documents"][0]["status"] == "failed"


def test_engine_options_reach_the_engine(srv: FakeHPDServer, tmp_path: Path) -> None:
    result = run(
        srv,
        SAMPLES / "scan.png",
        "-o",
        tmp_path,
        "--engine-option",
        'extra_body={"skip_special_tokens": false, "repetition_penalty": 1.05}',
        "--engine-option",
        "retry_backoff=0.1",
    )
    assert result.exit_code == 0, result.output
    [request] = srv.requests
    assert request.options["skip_special_tokens"] is False
    assert request.options["repetition_penalty"] == 1.05


@pytest.mark.parametrize(
    ("option", "words"),
    [("no-equals-sign", "is not KEY=VALUE"), ("=1", "is not KEY=VALUE")],
)
def test_malformed_engine_option_is_a_usage_error(option: str, words: str) -> None:
    result = CliRunner().invoke(main, ["convert", "x.pdf", "--engine-option", option])
    assert result.exit_code == 2 and words in result.output


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("extra_body=x", "error: openai engine: extra_body must be a JSON object, got 'x'"),
        (
            "retries_backoff=1",
            "error: openai engine: unknown engine option retries_backoff; it takes api_key, "
            "extra_body, logprobs, retry_backoff, retry_backoff_max",
        ),
    ],
    ids=["wrong_type", "misspelt"],
)
def test_a_bad_engine_option_is_one_line(
    srv: FakeHPDServer, tmp_path: Path, option: str, error: str
) -> None:
    result = run(srv, SAMPLES / "scan.png", "-o", tmp_path, "--engine-option", option)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [error]
    assert srv.chat_count == 0
