"""The Markdown, export and text layer options shared by convert and render (the fields of
`RenderOptions`), and the RenderOptions they make."""

from __future__ import annotations

import click

from hpdparse.commands.flags import flags, values
from hpdparse.errors import HpdparseError
from hpdparse.export.files import check_export_options
from hpdparse.markdown.render import RenderOptions
from hpdparse.settings import Keywords

render_options = flags(
    RenderOptions,
    "keep_headers",
    "images",
    "table_format",
    "math",
    "page_markers",
    "merge_paragraphs",
    "merge_tables",
    "text_layer",
    "docling",
    "chunks",
    "chunk_tokens",
    "chunk_tokenizer",
)


def make_render_options(kw: Keywords) -> RenderOptions:
    """Take the options out of click's keywords, checked (a missing extra or a tokenizer that
    cannot load is a usage error)."""
    options = RenderOptions(**values(RenderOptions, kw))
    try:
        check_export_options(options)
    except (HpdparseError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    return options
