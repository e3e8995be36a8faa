"""Looking at the results: the review pages (`hpdparse review`; the layout overlay PDF they show
is drawn by hpdparse.overlay). They read only what `convert` wrote (raw/, the .json, images/ and
the source file recorded in raw/document.json; the .json read back into page and block records
once, by markdown/json_export.py): no model, no GPU, any earlier output folder."""
