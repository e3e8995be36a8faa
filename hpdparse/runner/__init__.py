"""Runners: the stages of a conversion run, and the single-machine runner that wires them.

Stages (each callable on its own, keeping no hidden state):
    plan.plan_document(folder, source, settings, info)    skip, or claim + pages to decode
    read_ahead.ReadAhead(pool, ...).pages(pages)          rasterize + prepare ahead: PageRequests
    engine.run(requests, max_in_flight)                   decode (hpdparse.engines)
    folder.write_raw_page(RawPage(number, result, geometry, info, reuse))   store a raw page
    finish.DocumentFinish(folder, state, options, images, report).start_converted()()   write it
                                 (two steps: render here, then the writing on any thread)
Around them: settings (ConvertSettings and defaults), workers (the rasterizer pool, crops),
images (figure crops and the --layout overlay), document_book (`DocumentBook`: a run's
documents (`DocumentRun`) from added to closed, their reports and the progress display),
background_finish
(documents written on threads while the engine goes on), progress (display), render_folders
(`hpdparse render`).
`scheduler.Converter` is the single-machine runner; the other (Ray: plan on the driver,
rasterize/decode/save in actors with their own pool, finish on the driver once a document's pages
exist) calls the same stages and keeps its documents in a `DocumentBook` too.
Output folders come from `hpdparse.store` (`OutputStore(...).assign_folders(sources)`).
"""
