"""hpdparse: batch PDF-to-Markdown conversion with the HPD-Parsing document parser."""

__version__ = "0.1.0"
