"""The rasterizer workers' jobs run here in-process: figure crops are cut from the page as the
model saw it (and come back as PNG bytes, for the main process to write)."""

from __future__ import annotations

import io

from PIL import Image

from hpdparse.runner.workers import cut_crops, prepare_page
from hpdparse.sources.rasterize import rasterize_page
from tests.helpers.paths import SAMPLES


def test_crops_are_cut_from_the_page_as_the_model_saw_it() -> None:
    pdf = str(SAMPLES / "paper.pdf")
    page = rasterize_page(pdf, 1, 100)[0]
    crops = [
        ("images/page-0001-figure-01.png", (10, 20, 110, 70)),
        ("images/page-0001-figure-02.png", (-50, page.height - 30, 40, page.height + 500)),
        ("images/page-0001-figure-03.png", (5, 5, 5, 50)),  # empty: skipped
    ]
    cut = cut_crops(pdf, 1, 100, None, crops)
    assert isinstance(cut, list)
    assert [name for name, _ in cut] == [
        "images/page-0001-figure-01.png",
        "images/page-0001-figure-02.png",
    ]  # the empty one skipped
    with Image.open(io.BytesIO(cut[0][1])) as first:
        assert first.size == (100, 50)
        assert first.convert("RGB").tobytes() == page.crop((10, 20, 110, 70)).tobytes()
    with Image.open(io.BytesIO(cut[1][1])) as clamped:
        assert clamped.size == (40, 30)


def test_crop_and_prepare_errors_are_one_line() -> None:
    pdf = str(SAMPLES / "memo.pdf")
    missing = f"{pdf}: page 9 does not exist (the document has 1 page)"
    crops = [("images/a.png", (0, 0, 9, 9))]
    error = cut_crops(pdf, 9, 100, None, crops)
    assert error == f"images of page 9 not written: {missing}"
    assert prepare_page(pdf, 9, 100, None) == missing
