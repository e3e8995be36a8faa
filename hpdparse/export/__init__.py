"""Exports built from a rendered document (`hpdparse.markdown`) for retrieval pipelines:
`<stem>.docling.json` (a DoclingDocument, `docling.py`) and `<stem>.chunks.jsonl` (chunks with page
and box provenance, `chunks.py`). Both need the `hpdparse[docling]` extra
(`files.check_export_options`).

This layer reads the rendered document only (its units, its page and block records); the runners
write what it returns."""
