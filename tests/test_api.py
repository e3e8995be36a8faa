"""The Python API around the runner: inputs are reported by their own path, whatever characters
it holds (a colon is no separator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpdparse import api
from hpdparse.errors import EngineError
from hpdparse.runner.progress import Progress
from tests.helpers.paths import SAMPLES
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import ScriptedEngine


def test_a_colon_in_a_file_name(tmp_path: Path) -> None:
    good = make_pdf(tmp_path / "in" / "re:port.pdf", 1).resolve()
    missing = tmp_path / "in" / "no:such.pdf"
    out = tmp_path / "out"
    report = api.convert(
        [good, missing], out, engine=ScriptedEngine(), dpi=72, workers=1, progress=Progress()
    )
    by_source = {d.source: d for d in report.documents}
    assert set(by_source) == {str(good), str(missing)}
    assert by_source[str(missing)].status == "failed"
    assert by_source[str(missing)].error == f"{missing}: no such file or folder"
    assert by_source[str(good)].status == "converted"
    assert (out / "re:port" / "re:port.md").is_file()


def test_an_engine_that_cannot_be_made_reports_every_input_by_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "a:b.pdf"
    memo = (SAMPLES / "memo.pdf").resolve()
    with pytest.raises(EngineError):
        api.convert([missing, memo], tmp_path, engine="nope", report_path=tmp_path / "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    assert [d["source"] for d in report["documents"]] == [str(missing), str(memo)]
    assert report["documents"][0]["error"] == f"{missing}: no such file or folder"
