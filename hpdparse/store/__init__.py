"""The output store: the one place that reads and writes output folders.

atomic (durable writes), folders (paths inside a document folder), naming (which folder a
source gets), raw_pages (one decoded page), state (resume state), report (the run report).

Layout of one document folder (``OUT/<stem>/``)::

    <stem>.md              written last: the document is finished only when it exists
    <stem>.json            blocks per page (from the renderer)
    images/page-0003-figure-01.png
    raw/page-0003.txt      the raw model text, exactly; written first
    raw/page-0003.json     its metadata (engine, model, prompt, dpi, sha256 of the .txt ...),
                           written after the .txt: a page is reusable only when its .json exists
                           and its sha256 matches the .txt
    raw/document.json      resume state: the source (path, size, sha256), the settings of the run
                           that owns the folder, its status and the failed pages

Every file goes through `atomic_write_bytes` (temporary file in the same folder, fsync, rename), so
a SIGKILL at any moment leaves either the old file, the new file, or a stray temporary file that
`remove_stray_temporaries` deletes on the next run.
"""
