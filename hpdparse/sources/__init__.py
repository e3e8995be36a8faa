"""Inputs: find files (discover), select pages (page_ranges), open PDFs and images (open, pdf,
images, labels) and rasterize their pages (rasterize) for the engine."""
