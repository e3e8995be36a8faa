"""HPD blocks -> Markdown and JSON: the renderer fills each page's and block's record
(hpd/stream.py's ParsedPage and Block), which the exports, the overlay and the review pages read;
json_export.py alone turns them into <stem>.json (structure: docs/schema.md) and back."""
