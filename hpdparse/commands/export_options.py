"""The command-line options of the exports (--docling, --chunks, --chunk-tokens,
--chunk-tokenizer), shared by `convert` and `render`."""

from __future__ import annotations

from typing import Any

import click

from hpdparse.errors import HpdparseError
from hpdparse.export.files import check_export_options
from hpdparse.markdown.render import RenderOptions

DEFAULT_CHUNK_TOKENS = RenderOptions.chunk_tokens


def export_options() -> list[Any]:
    return [
        click.option(
            "--docling",
            is_flag=True,
            help="Also write <stem>.docling.json: the document as a DoclingDocument (LangChain, "
            "LlamaIndex, Haystack read it). Needs hpdparse[docling].",
        ),
        click.option(
            "--chunks",
            is_flag=True,
            help="Also write <stem>.chunks.jsonl: chunks for retrieval with their headings, pages "
            "and boxes. Needs hpdparse[docling].",
        ),
        click.option(
            "--chunk-tokens",
            type=click.IntRange(min=1),
            default=DEFAULT_CHUNK_TOKENS,
            show_default=True,
            help="Most tokens in a chunk (a single larger block is a chunk of its own).",
        ),
        click.option(
            "--chunk-tokenizer",
            metavar="ID|DIR",
            help="Count chunk tokens with this Hugging Face tokenizer (id or local folder); "
            "default: the Tekken tokenizer mistral-common ships (works offline).",
        ),
    ]


def export_settings(kw: dict[str, Any]) -> dict[str, Any]:
    """Pop the export options from click's keywords into RenderOptions fields, checked (a
    missing extra or a tokenizer that cannot load is a usage error)."""
    settings = {
        "docling": kw.pop("docling"),
        "chunks": kw.pop("chunks"),
        "chunk_tokens": kw.pop("chunk_tokens"),
        "chunk_tokenizer": kw.pop("chunk_tokenizer"),
    }
    try:
        check_export_options(RenderOptions(**settings))
    except (HpdparseError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    return settings
