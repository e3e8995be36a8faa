"""The review pages' HTML: Jinja2 templates from assets/ (autoescaping on), our own CSS and
JavaScript inlined, and a Content-Security-Policy that lets exactly those run and nothing else
(no script, style, font or connection from anywhere; images only from data: URLs)."""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from hpdparse.overlay.roles import role_css

ASSETS = Path(__file__).with_name("assets")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(ASSETS),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@functools.cache
def asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


def content_security_policy(style: str, script: str | None) -> str:
    """Only the page's own inline style and script (by hash) and data: images."""
    return "; ".join(
        [
            "default-src 'none'",
            "img-src data:",
            f"style-src {_digest(style)}",
            f"script-src {_digest(script)}" if script is not None else "script-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


def render(template: str, script: str | None = "review.js", **context: Any) -> str:
    """Render assets/`template` with the stylesheet (and `script`) inlined."""
    style = asset("review.css") + role_css()
    code = asset(script) if script else None
    for text, tag in ((style, "</style"), (code or "", "</script")):
        assert tag not in text.lower(), f"an asset must not contain {tag}"
    return (
        _environment()
        .get_template(template)
        .render(
            style=Markup(style),
            script=Markup(code) if code is not None else None,
            csp=content_security_policy(style, code),
            **context,
        )
    )
