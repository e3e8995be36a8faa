"""Inputs beyond PDF, made by the tests: EPUB, FB2, SVG, CBZ and XPS files written by hand (the
formats are ZIP or XML files), and Office files made by LibreOffice itself from HTML or CSV."""

from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path

from PIL import Image

from hpdparse.sources.office import soffice_command


def make_epub(path: Path, chapters: list[str]) -> Path:
    """An EPUB 2 book with one XHTML chapter per text."""
    items = "".join(
        f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(len(chapters))
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    with zipfile.ZipFile(path, "w") as epub:
        epub.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        epub.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        epub.writestr(
            "content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
            'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            '<dc:title>Test book</dc:title><dc:identifier id="id">test-1</dc:identifier>'
            f"<dc:language>en</dc:language></metadata><manifest>{items}</manifest>"
            f"<spine>{spine}</spine></package>",
        )
        for i, text in enumerate(chapters):
            epub.writestr(
                f"c{i}.xhtml",
                '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
                f"<title>Chapter {i + 1}</title></head><body><h1>Chapter {i + 1}</h1>"
                f"<p>{text}</p></body></html>",
            )
    return path


def make_fb2(path: Path, text: str) -> Path:
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>'
        '<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0"><description>'
        "<title-info><book-title>Test</book-title></title-info></description><body><section>"
        f"<title><p>Section one</p></title><p>{text}</p></section></body></FictionBook>",
        encoding="utf-8",
    )
    return path


def make_svg(path: Path, text: str) -> Path:
    path.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="600" height="400">'
        '<rect width="600" height="400" fill="white"/>'
        '<rect x="40" y="120" width="200" height="100" fill="red"/>'
        f'<text x="40" y="60" font-size="32">{text}</text></svg>',
        encoding="utf-8",
    )
    return path


def make_cbz(path: Path, colours: list[tuple[int, int, int]]) -> Path:
    """A comic book archive: one PNG page per colour."""
    with zipfile.ZipFile(path, "w") as cbz:
        for i, colour in enumerate(colours, start=1):
            buffer = io.BytesIO()
            Image.new("RGB", (300, 400), colour).save(buffer, format="PNG")
            cbz.writestr(f"page{i:02}.png", buffer.getvalue())
    return path


def make_xps(path: Path, pages: int) -> Path:
    """An XPS document of `pages` empty pages with a red rectangle each."""
    page = (
        '<FixedPage xmlns="http://schemas.microsoft.com/xps/2005/06" Width="816" Height="1056" '
        'xml:lang="en-US"><Path Data="M 100,100 L 400,100 L 400,300 L 100,300 Z" Fill="#FFFF0000"/>'
        "</FixedPage>"
    )
    refs = "".join(f'<PageContent Source="Pages/{n}.fpage"/>' for n in range(1, pages + 1))
    with zipfile.ZipFile(path, "w") as xps:
        xps.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats'
            '-package.relationships+xml"/><Default Extension="fdseq" ContentType="application/'
            'vnd.ms-package.xps-fixeddocumentsequence+xml"/><Default Extension="fdoc" '
            'ContentType="application/vnd.ms-package.xps-fixeddocument+xml"/><Default '
            'Extension="fpage" ContentType="application/vnd.ms-package.xps-fixedpage+xml"/>'
            "</Types>",
        )
        xps.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            '2006/relationships"><Relationship Type="http://schemas.microsoft.com/xps/2005/06/'
            'fixedrepresentation" Target="/FixedDocSeq.fdseq" Id="R0"/></Relationships>',
        )
        xps.writestr(
            "FixedDocSeq.fdseq",
            '<FixedDocumentSequence xmlns="http://schemas.microsoft.com/xps/2005/06">'
            '<DocumentReference Source="Doc.fdoc"/></FixedDocumentSequence>',
        )
        xps.writestr(
            "Doc.fdoc",
            f'<FixedDocument xmlns="http://schemas.microsoft.com/xps/2005/06">{refs}</FixedDocument>',
        )
        for n in range(1, pages + 1):
            xps.writestr(f"Pages/{n}.fpage", page)
    return path


def libreoffice_convert(sources: list[Path], to: str, outdir: Path, profile: Path) -> list[Path]:
    """Office files made by LibreOffice from `sources` (HTML, CSV...): `to` is the target format
    as `soffice --convert-to` takes it (docx, xlsx, odt...)."""
    soffice = soffice_command()
    assert soffice is not None, "LibreOffice is not installed"
    subprocess.run(
        [
            soffice,
            "--headless",
            f"-env:UserInstallation={profile.absolute().as_uri()}",
            "--convert-to",
            to,
            "--outdir",
            str(outdir),
            *map(str, sources),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    extension = to.split(":")[0]
    made = [outdir / f"{source.stem}.{extension}" for source in sources]
    for path in made:
        assert path.is_file(), f"LibreOffice did not make {path}"
    return made
