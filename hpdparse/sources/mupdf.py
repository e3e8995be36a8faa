"""PyMuPDF, imported without the extras PyMuPDF 2 loads at its own import.

PyMuPDF 2 imports `pymupdf.layout` (the pymupdf-layout package: onnxruntime and an ONNX page-layout
model, for `Page.get_layout`) and `pymupdf4llm` (for `pymupdf.to_markdown`) whenever it is
imported, which costs seconds at every start of `hpdparse`, its worker processes and its server.
hpdparse uses neither, so they are kept out of the first import; both stay importable afterwards
(a later `import pymupdf.layout` activates the layout model as usual). PyMuPDF 1.x has neither.

Every hpdparse module imports PyMuPDF as `from hpdparse.sources.mupdf import pymupdf`.
"""

from __future__ import annotations

import sys

_NOT_NEEDED = ("pymupdf.layout", "pymupdf4llm")

# Only the first import of PyMuPDF in the process runs its extras' imports.
_blocked = [] if "pymupdf" in sys.modules else [n for n in _NOT_NEEDED if n not in sys.modules]
for _name in _blocked:
    sys.modules[_name] = None  # type: ignore[assignment]  # an `import` of it raises ImportError
try:
    import pymupdf
finally:
    for _name in _blocked:
        if sys.modules.get(_name, 0) is None:
            del sys.modules[_name]

__all__ = ["pymupdf"]
