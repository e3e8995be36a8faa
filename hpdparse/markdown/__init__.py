"""HPD blocks -> Markdown and JSON (JSON structure: docs/schema.md)."""

from hpdparse.markdown.render import ImageCrop, RenderedDocument, RenderOptions, render_document

__all__ = ["ImageCrop", "RenderOptions", "RenderedDocument", "render_document"]
