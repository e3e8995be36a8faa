"""hpdparse: batch PDF-to-Markdown conversion with the HPD-Parsing document parser.

The packages and top-level modules form layers, lowest first. A module imports only from its
own layer or the layers below it, never from one above (tests/test_layers.py checks every import,
those inside functions included, and that no modules import each other in a cycle):

    1. errors, wire, remote, malloc, settings  one-line errors; the OpenAI chat-completions
                           JSON (standard library); URLs and object storage through fsspec;
                           glibc's malloc parameters; how an option is declared (once: flag,
                           help, bounds) and the --text-layer mode
    2. hpd, sources        the model's protocol and stream; input documents, their pages and
                           each page's geometry
    3. engines             run the model on page images (vllm, torch, openai), the registry; a
                           page's request (PageRequest) and result (PageResult), the reuse key
    4. store               output folders, raw pages (RawPage), resume state, the run report
    5. markdown            HPD blocks -> Markdown and JSON; a document's record from its folder
    6. overlay, export     the --layout overlay PDF: block roles, colours, drawing; the
                           DoclingDocument and the retrieval chunks (docling-core)
    7. runner              a conversion run: plan, rasterize, decode, save, finish (runner.ray)
    8. serve, review, eval `hpdparse serve` (documents over HTTP, with a durable store and a
                           web page; an OpenAI-compatible page API); the review pages;
                           `hpdparse eval` (OmniDocBench's end-to-end scores of Markdown)
    9. api                 the Python API (`hpdparse.api`)
   10. commands, __main__  the command line: convert, render, review, serve, eval
"""

__version__ = "0.1.0"
