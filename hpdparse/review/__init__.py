"""Looking at the results: the layout overlay PDF (`convert/render --layout`) and the review pages
(`hpdparse review`). Both read only what `convert` wrote (raw/, the .json, images/ and the source
file recorded in raw/document.json): no model, no GPU, any earlier output folder."""
