"""Document statuses, the one list of them: the run report gives every input file one of
REPORT_STATUSES; the resume state (raw/document.json) records IN_PROGRESS while a run owns the
folder, then CONVERTED or PARTIAL."""

STATUS_CONVERTED = "converted"
"""Every selected page decoded and every image written."""

STATUS_PARTIAL = "partial"
"""Written, with failed pages (marked in the Markdown) or images that could not be cut."""

STATUS_FAILED = "failed"
"""Nothing written (the file cannot be read, no page was decoded, the folder cannot be written)."""

STATUS_SKIPPED = "skipped"
"""Converted by an earlier run with the same settings: nothing to do."""

STATUS_INTERRUPTED = "interrupted"
"""The run was stopped (Ctrl-C, SIGTERM) before the document was finished."""

STATUS_IN_PROGRESS = "in-progress"
"""Resume state only: a run owns the folder and has not finished the document."""

REPORT_STATUSES = (
    STATUS_CONVERTED,
    STATUS_PARTIAL,
    STATUS_FAILED,
    STATUS_SKIPPED,
    STATUS_INTERRUPTED,
)
