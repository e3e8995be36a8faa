"""The whole shared corpus through `hpdparse convert` against the fake HPD server: every file ends
as MANIFEST.tsv says, with one-line errors, no traceback and no hang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import REPO

DPI = "50"
BATCH_TIMEOUT = 300  # seconds; the batch takes about a minute on 2 cores


@pytest.fixture(scope="module")
def server():
    with FakeHPDServer() as srv:
        yield srv


def convert(server: FakeHPDServer, inputs: list[Path], out: Path, *extra: str):
    report = out.parent / f"{out.name}-report.json"
    cmd = [
        sys.executable,
        "-m",
        "hpdparse",
        "convert",
        *map(str, inputs),
        "-o",
        str(out),
        "--engine",
        "openai",
        "--server",
        server.url,
        "--dpi",
        DPI,
        "--report",
        str(report),
        "--quiet",
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=BATCH_TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    return proc, {Path(d["source"]).name: d for d in data["documents"]}


@pytest.mark.slow
def test_whole_corpus_ends_as_manifest_says(
    server: FakeHPDServer, corpus_dir: Path, corpus_manifest: list[dict[str, str]], tmp_path: Path
) -> None:
    expected = {row["file"]: row["expected"] for row in corpus_manifest}
    files = [corpus_dir / name for name in expected]
    out = tmp_path / "out"
    proc, docs = convert(server, files, out)
    assert proc.returncode == 1  # the corpus holds files that must fail
    assert set(docs) == set(expected)
    # --quiet: nothing but errors (the fake server's missing log-probabilities are not one)
    for line in proc.stderr.splitlines():
        if line.strip():
            assert line.startswith("error: "), line
    problems = []
    for name, want in expected.items():
        doc = docs[name]
        stem = Path(name).stem
        md = Path(doc["output_dir"] or out / stem) / f"{stem}.md"
        if want == "convert":
            if doc["status"] != "converted" or not md.is_file():
                problems.append(f"{name}: {doc['status']} {doc['error']}")
        elif want == "clean-error" or want.startswith("convert-with-password:"):
            ok = doc["status"] == "failed" and doc["error"] and name in doc["error"]
            if want != "clean-error":
                ok = ok and "password" in doc["error"]
            if not ok or "\n" in (doc["error"] or "") or md.exists():
                problems.append(f"{name}: expected a clean error, got {doc['status']} {doc}")
        else:
            problems.append(f"{name}: unknown expectation {want!r}")
    assert not problems, "\n".join(problems)

    # The encrypted files convert with their password.
    for name, want in expected.items():
        if want.startswith("convert-with-password:"):
            password = want.split(":", 1)[1]
            proc, docs = convert(
                server, [corpus_dir / name], tmp_path / "pw", "--password", password
            )
            assert proc.returncode == 0, proc.stderr
            assert docs[name]["status"] == "converted"
