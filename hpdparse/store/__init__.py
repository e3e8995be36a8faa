"""The output store: the one place that reads and writes output folders.

output_store (`OutputStore`: the root OUT, which folder each source gets;
`open_document_folder`), outputs (a finished document's files, for review),
document_folder (`DocumentFolder`: everything in one document folder, on any storage),
local (`LocalFolder`: one on the file system), fsspec_folder (`FsspecFolder`: one on an object
store such as s3://), layout (file names), raw_pages (a page's record, `RawPage`), state (resume
state), statuses, report (the run report), atomic (durable writes).

Layout of one document folder (``OUT/<stem>/``)::

    <stem>.md              written last: the document is finished only when it exists
    <stem>.json            blocks per page (from the renderer)
    images/page-0003-figure-01.png
    raw/page-0003.txt      the raw model text, exactly; written first
    raw/page-0003.json     its metadata (`raw_pages.RawPage`: engine, model, prompt, dpi ...
                           and the sha256 of the .txt), written after the .txt: a page is reusable
                           only when its .json exists and its sha256 matches the .txt
    raw/document.json      resume state: the source (path, size, sha256), the settings of the run
                           that owns the folder, its status and the failed pages

On the local file system every file goes through `atomic_write_bytes` (temporary file in the same
folder, fsync, rename), so a SIGKILL at any moment leaves either the old file, the new file, or a
stray temporary file that the next run deletes (`DocumentFolder.create`).
"""
