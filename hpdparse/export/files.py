"""What `--docling` and `--chunks` add to a document folder: the bytes of `<stem>.docling.json`
and `<stem>.chunks.jsonl`, built from a rendered document (the runners write them)."""

from __future__ import annotations

from dataclasses import dataclass

from hpdparse.engines.registry import importable
from hpdparse.errors import HpdparseError
from hpdparse.markdown.render import RenderedDocument, RenderOptions, gc_paused

# module -> the package that provides it: what --docling needs, and what --chunks needs too
_DOCLING_MODULES = {"docling_core": "docling-core"}
_CHUNK_MODULES = {"semchunk": "semchunk", "mistral_common": "mistral-common"}


class DoclingMissing(HpdparseError):
    """--docling or --chunks without the `hpdparse[docling]` extra installed."""


@dataclass
class Exports:
    docling: bytes | None = None  # <stem>.docling.json, with --docling
    chunks: bytes | None = None  # <stem>.chunks.jsonl, with --chunks


def check_export_options(options: RenderOptions) -> None:
    """Before any work: the `hpdparse[docling]` extra is installed and the chunk tokenizer loads
    (one-line DoclingMissing / TokenizerError), the token limit is positive (ValueError)."""
    if not (options.docling or options.chunks):
        return
    modules = {**_DOCLING_MODULES, **(_CHUNK_MODULES if options.chunks else {})}
    missing = [package for module, package in modules.items() if not importable(module)]
    if missing:
        what = "--chunks" if options.chunks else "--docling"
        raise DoclingMissing(
            f"{what} needs the docling extra ({', '.join(missing)} not installed): "
            "pip install 'hpdparse[docling]'"
        )
    if options.chunks:
        if options.chunk_tokens < 1:
            raise ValueError(f"--chunk-tokens must be at least 1, not {options.chunk_tokens}")
        from hpdparse.export.tokenizers import load_tokenizer

        load_tokenizer(options.chunk_tokenizer, options.chunk_tokens)


def build_exports(rendered: RenderedDocument, options: RenderOptions) -> Exports:
    """The export files `options` ask for (none: no docling-core import)."""
    exports = Exports()
    if not (options.docling or options.chunks):
        return exports
    from hpdparse.export.chunks import chunk_records, chunks_jsonl
    from hpdparse.export.docling import docling_json, to_docling

    with gc_paused():  # thousands of small acyclic objects (see gc_paused)
        # the chunks take their pages and boxes from `refs`: without --docling, no provenance
        export = to_docling(rendered, provenance=options.docling)
        if options.docling:
            exports.docling = docling_json(export.document)
        if options.chunks:
            limit, tokenizer = options.chunk_tokens, options.chunk_tokenizer
            records = chunk_records(export, limit, tokenizer)
            exports.chunks = chunks_jsonl(records).encode("utf-8")
    return exports
