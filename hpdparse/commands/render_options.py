"""Markdown options shared by convert and render, and the RenderOptions they make."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from hpdparse.commands.export_options import export_options, export_settings
from hpdparse.commands.options import text_layer_option
from hpdparse.markdown.render import RenderOptions


def render_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--keep-headers",
            is_flag=True,
            help="Keep page headers, footers, page numbers and side notes in the Markdown "
            "(they are always in the JSON).",
        ),
        click.option(
            "--no-images", is_flag=True, help="Do not crop figures into images/ nor link them."
        ),
        click.option(
            "--table-format",
            type=click.Choice(["auto", "gfm", "html"]),
            default="auto",
            show_default=True,
            help="Tables as GFM pipe tables, HTML, or auto (GFM unless cells span).",
        ),
        click.option(
            "--math",
            type=click.Choice(["dollar", "latex"]),
            default="dollar",
            show_default=True,
            help="Math delimiters: $...$ and $$...$$, or \\(...\\) and \\[...\\].",
        ),
        click.option("--page-markers", is_flag=True, help="Mark page starts with an HTML comment."),
        click.option(
            "--no-merge-paragraphs",
            is_flag=True,
            help="Do not join paragraphs split across pages.",
        ),
        click.option(
            "--no-merge-tables", is_flag=True, help="Do not join tables split across pages."
        ),
        text_layer_option,
        *export_options(),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def layout_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--layout",
        is_flag=True,
        help="Also write <stem>.layout.pdf: every page with each block's box in its role's "
        "colour, its reading-order number and label; failed and truncated pages marked.",
    )(f)


def make_render_options(kw: dict[str, Any]) -> RenderOptions:
    return RenderOptions(
        keep_headers=kw.pop("keep_headers"),
        images=not kw.pop("no_images"),
        table_format=kw.pop("table_format"),
        math=kw.pop("math"),
        page_markers=kw.pop("page_markers"),
        merge_paragraphs=not kw.pop("no_merge_paragraphs"),
        merge_tables=not kw.pop("no_merge_tables"),
        text_layer=kw.pop("text_layer"),
        **export_settings(kw),
    )
