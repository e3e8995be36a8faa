"""Plan a document: skip it (converted earlier with the same settings), or claim its output
folder, keep the raw pages a previous run saved that still fit, and say which pages to decode.

`plan_document` is a stage on its own: it needs a folder, the source, the run's settings and the
engine's identity, and keeps no state, so any runner (this machine's scheduler, a Ray driver)
calls it once per document before sending the document's pages anywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from hpdparse.engines.base import EngineInfo, ReuseKey
from hpdparse.errors import HpdparseError, InputError, OutputError
from hpdparse.runner.settings import ConvertSettings
from hpdparse.sources.document import OFFICE_SUFFIXES
from hpdparse.sources.location import UrlSource, held_once
from hpdparse.sources.office import converted_pdf
from hpdparse.sources.open import open_source
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState, SourceIdentity
from hpdparse.store.statuses import STATUS_CONVERTED, STATUS_IN_PROGRESS


@dataclass(frozen=True)
class DocumentPlan:
    """What to do with one document. `skip`: nothing (`state` is the earlier run's); otherwise
    the folder is claimed (`state` saved in it as in progress), `reused` pages are kept and
    `to_decode` go to the engine (none: finish the document at once)."""

    state: DocumentState
    skip: bool
    to_decode: list[int]
    reused: int


def plan_document(
    folder: DocumentFolder, source: Path | UrlSource, settings: ConvertSettings, info: EngineInfo
) -> DocumentPlan:
    """Plan `source` (an absolute path or a URL) into `folder`. Raises InputError or
    OutputError, one line naming the file or folder, when the document cannot be converted."""
    try:
        with held_once(source):  # an object at a URL is read once here, not once per question
            return _plan(folder, source, settings, info)
    except OSError as exc:
        where = exc.filename or source  # a failed storage request names its URL
        raise InputError(f"{where}: {exc.strerror or exc}", path=source) from None


def finished_earlier(
    folder: DocumentFolder, source: Path | UrlSource, settings: ConvertSettings, info: EngineInfo
) -> bool:
    """True when planning would skip `source`: converted earlier with these settings (what
    needs no conversion of an Office file by LibreOffice to know)."""
    if settings.overwrite:  # before anything is read: a URL's identity may cost a download
        return False
    try:
        old = folder.load_state()
        return _same_source(old, source) and _finished(folder, old, settings, info)
    except (OSError, HpdparseError):
        return False


def _same_source(old: DocumentState | None, src: Path | UrlSource) -> TypeGuard[DocumentState]:
    """True when the folder's earlier run converted `src`, unchanged since."""
    return old is not None and old.source.path == str(src) and old.source.matches_file(src)


def _plan(
    folder: DocumentFolder, src: Path | UrlSource, s: ConvertSettings, info: EngineInfo
) -> DocumentPlan:
    old = folder.load_state()
    same_source = _same_source(old, src)
    if not src.is_file():
        raise InputError(f"{src}: no such file", path=src)
    if same_source and _finished(folder, old, s, info):
        return DocumentPlan(old, skip=True, to_decode=[], reused=len(old.selected))
    try:
        identity = old.source if same_source else SourceIdentity.of(src)
    except OSError as exc:
        raise InputError(f"{src}: cannot be read ({exc.strerror or exc})", path=src) from None
    with open_source(src, s.password) as opened:
        page_count = opened.page_count
    keep_pdf = s.keep_converted_pdf and src.suffix.lower() in OFFICE_SUFFIXES
    selected = s.pages.select(page_count)
    if not selected:
        raise InputError(
            f"{src}: no page in --pages {s.pages} (the document has {page_count} "
            f"page{'s' if page_count != 1 else ''})",
            path=src,
        )
    if (s.overwrite or (old is not None and not same_source)) and folder.exists():
        folder.clear(old.stem if old else folder.name)
    folder.create()
    stem = folder.name
    folder.remove_markdown(stem)  # unfinished from here on
    to_decode, reused = _pages_to_decode(folder, selected, info.reuse_key_at(s.dpi))
    state = DocumentState(
        source=identity,
        stem=stem,
        page_count=page_count,
        pages_spec=None if s.pages.is_all else str(s.pages),
        selected=selected,
        dpi=s.dpi,
        engine=info.engine,
        model=info.model,
        revision=info.revision,
        reuse_key=info.reuse_key(),
        render_options=dataclasses.asdict(s.render_options),
        status=STATUS_IN_PROGRESS,
    )
    try:
        if keep_pdf:
            with converted_pdf(src) as pdf:  # converted already: found in the folder
                folder.write_converted_pdf(stem, pdf.read_bytes())
        folder.save_state(state)
    except OSError as exc:
        raise OutputError(
            f"{folder.location}: cannot write the output folder: {exc.strerror}",
            path=folder.location,
        ) from None
    return DocumentPlan(state, skip=False, to_decode=to_decode, reused=reused)


def _finished(
    folder: DocumentFolder, old: DocumentState, s: ConvertSettings, info: EngineInfo
) -> bool:
    """True when the earlier run finished the document with the settings of this one (and
    this run does not overwrite it)."""
    return (
        not s.overwrite
        and folder.has_markdown(old.stem)
        and old.status == STATUS_CONVERTED
        and old.dpi == s.dpi
        and old.reuse_key == info.reuse_key()
        and old.render_options == dataclasses.asdict(s.render_options)
        and old.selected == s.pages.select(old.page_count)
        and (not s.layout or folder.has_layout_pdf(old.stem))
        and not (
            s.keep_converted_pdf
            and Path(old.source.path).suffix.lower() in OFFICE_SUFFIXES
            and not folder.has_converted_pdf(old.stem)
        )
    )


def _pages_to_decode(
    folder: DocumentFolder, selected: list[int], key: ReuseKey
) -> tuple[list[int], int]:
    """The selected pages without a reusable raw output (any other saved output of theirs is
    removed), and how many are reused. One listing of raw/, then reads of the saved pages only,
    together (on an object store: one LIST, not a request per page, and the GETs concurrent)."""
    to_decode = []
    reused = 0
    saved = set(folder.saved_page_numbers())
    pages = folder.read_raw_pages([n for n in selected if n in saved])
    for number in selected:
        page = pages.get(number)
        if page is not None and page.reusable(key):
            reused += 1
        else:
            if number in saved:
                folder.remove_raw_page(number)
            to_decode.append(number)
    return to_decode, reused
