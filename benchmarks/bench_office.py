"""LibreOffice conversion time: seconds to open an Office file as `open_source` does (container
check, soffice --headless --convert-to pdf, open the PDF), for a two-page DOCX made here.

Usage: .venv/bin/python benchmarks/bench_office.py [--rounds 5]

Prints the seconds of each round and the median for:
- a conversion folder (as a conversion run has): one LibreOffice profile kept by the process,
  each round a file with other bytes (so it is converted, not found);
- the same file again with that folder: found, not converted;
- no folder (`hpdparse render`, the API's open_source): a new profile in a temporary folder each
  time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from hpdparse.sources.office import soffice_command, use_conversion_folder
from hpdparse.sources.open import open_source

HTML = (
    "<html><body><h1>Annual report</h1>"
    + "<p>Revenue grew in every region this year.</p>" * 30
    + '<h2 style="page-break-before: always">Results</h2><p>The second page.</p></body></html>'
)


def _docx(folder: Path) -> Path:
    html = folder / "report.html"
    html.write_text(HTML)
    soffice = soffice_command()
    assert soffice is not None, "LibreOffice is not installed"
    profile = (folder / "maker").absolute().as_uri()
    subprocess.run(
        [soffice, "--headless", f"-env:UserInstallation={profile}", "--convert-to",
         "docx:MS Word 2007 XML", "--outdir", str(folder), str(html)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return folder / "report.docx"


def _variant(docx: Path, n: int) -> Path:
    """The same document with other bytes (a ZIP comment), so that its digest differs."""
    path = docx.with_name(f"report-{n}.docx")
    path.write_bytes(docx.read_bytes())
    with zipfile.ZipFile(path, "a") as archive:
        archive.comment = f"copy {n}".encode()
    return path


def _time(label: str, rounds: int, opened: Callable[[int], Path]) -> None:
    seconds = []
    for n in range(rounds):
        path = opened(n)
        start = time.perf_counter()
        open_source(path).close()
        seconds.append(time.perf_counter() - start)
    shown = " ".join(f"{s:.2f}" for s in seconds)
    print(f"{label:<34} median {statistics.median(seconds):.2f} s  ({shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-office-") as scratch:
        folder = Path(scratch)
        docx = _docx(folder)
        converted = folder / "converted"
        converted.mkdir()
        use_conversion_folder(converted)
        _time("folder, new bytes (converted)", args.rounds, lambda n: _variant(docx, n))
        _time("folder, same bytes (found)", args.rounds, lambda n: docx.with_name("report-0.docx"))
        use_conversion_folder(None)
        _time("no folder (new profile each time)", args.rounds, lambda n: docx)


if __name__ == "__main__":
    main()
