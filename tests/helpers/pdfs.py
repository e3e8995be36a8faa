"""Small generated PDFs for runner tests."""

from __future__ import annotations

from pathlib import Path

import pymupdf


def make_pdf(path: Path, pages: int = 2, tag: str = "doc", password: str | None = None) -> Path:
    """A text PDF of A4 pages that all look different (so an engine or server tells them apart);
    encrypted with AES-256 when `password` is given."""
    doc = pymupdf.open()
    for n in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 90), f"{tag} page {n}", fontsize=28)
        page.insert_text((72, 140 + 20 * (n % 30)), "x" * (n % 40 + 1), fontsize=12)
    path.parent.mkdir(parents=True, exist_ok=True)
    if password:
        doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw="own")
    else:
        doc.save(path)
    doc.close()
    return path


def join_pdfs(path: Path, parts: list[Path]) -> Path:
    """One PDF of the pages of `parts`, in order."""
    with pymupdf.open() as doc:
        for part in parts:
            with pymupdf.open(part) as pages:
                doc.insert_pdf(pages)
        doc.save(path)
    return path
