"""Documents over HTTP: `hpdparse serve`'s conversion service (the routes under /v1/documents).

A document flows through these modules in this order:

    options.py  the conversion options a caller sets per document, read from form or JSON
                fields by the declarations of the settings they belong to
    store.py    the durable store under --store: each document's record (`DocumentJob`,
                job.json), its upload and its output folder, written atomically
    runner.py   the documents' conversions: each one a `runner.scheduler.Converter` run over
                the server's shared rasterizer processes, on a thread of its own
    engine.py   the server's engine as such a run sees it: its pages join the server's page
                queue, one batch with every other document and the chat requests
    routes.py   the HTTP routes, the OpenAPI description (openapi.json) and the web page
                (page.html) at /
    results.py  a finished document's files as the routes answer them (one file, the zip,
                its Markdown as HTML, its review page)
"""
