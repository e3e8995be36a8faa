"""The optional `hpdparse[docling]` extra: a missing one is a one-line error before any work."""

from __future__ import annotations

import importlib.util

from hpdparse.errors import HpdparseError

# module -> the package that provides it
_DOCLING_MODULES = {"docling_core": "docling-core"}
_CHUNK_MODULES = {"semchunk": "semchunk", "mistral_common": "mistral-common"}


class DoclingMissing(HpdparseError):
    """--docling or --chunks without the `hpdparse[docling]` extra installed."""


def require_docling(chunks: bool = False) -> None:
    """Raise DoclingMissing (one line) unless the packages --docling (and --chunks) need are
    installed."""
    modules = {**_DOCLING_MODULES, **(_CHUNK_MODULES if chunks else {})}
    missing = [package for module, package in modules.items() if not _installed(module)]
    if missing:
        what = "--chunks" if chunks else "--docling"
        raise DoclingMissing(
            f"{what} needs the docling extra ({', '.join(missing)} not installed): "
            "pip install 'hpdparse[docling]'"
        )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
