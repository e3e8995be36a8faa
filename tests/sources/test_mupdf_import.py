"""hpdparse imports PyMuPDF without the extras PyMuPDF 2 loads at its own import (seconds at every
start of hpdparse, hpdparse.sources.mupdf), and they stay importable afterwards."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from tests.helpers.paths import REPO

_CHECK = """
import importlib, importlib.util, json, sys
import hpdparse.commands.main
extras = ("pymupdf.layout", "pymupdf4llm", "onnxruntime")
loaded = [name for name in extras if name in sys.modules]
later = []
for name in extras[:2]:
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)
        later.append(name)
print(json.dumps({"loaded": loaded, "imported_later": later, "pymupdf": "pymupdf" in sys.modules}))
"""


def test_the_command_line_loads_pymupdf_without_its_layout_model() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["pymupdf"] and found["loaded"] == []
    # Where installed (PyMuPDF 2), a program that wants them can still import them.
    installed = [n for n in ("pymupdf.layout", "pymupdf4llm") if importlib.util.find_spec(n)]
    assert found["imported_later"] == installed
