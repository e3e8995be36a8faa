"""The review pages in a real headless Chromium (Debian's package, driven by Playwright): output
folders made by the real convert against the fake HPD server, pages written by `hpdparse review`.

Screenshots of every page go to --screenshots DIR (default: this run's pytest tmp folder)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpdparse import api
from hpdparse.runner.progress import Progress
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import REPO, SAMPLES

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

HOSTILE_STREAM = (
    "<BLOCK>doc_title [100, 40, 900, 80]<CHILD>Title </script><script>window.__pwned='title'"
    "</script>"
    "<BLOCK>text [100, 90, 900, 140]<CHILD>Hello <img src=x onerror=\"window.__pwned='img'\"> "
    "[click](javascript:window.__pwned='link') <a href=\"javascript:window.__pwned='a'\">a</a> "
    "![i](javascript:window.__pwned='image') <svg onload=\"window.__pwned='svg'\"></svg> "
    "<style>body{display:none}</style> <iframe src=\"javascript:window.__pwned='frame'\">"
    "<BLOCK>table [100, 150, 900, 300]<CHILD><table><tr><td onclick=\"window.__pwned='td'\" "
    'rowspan="2"><script>window.__pwned=\'cell\'</script>x</td><td colspan="2">'
    "<img src=x onerror=\"window.__pwned='cellimg'\">y</td></tr><tr><td>\\(\\href{javascript:"
    "window.__pwned='cellmath'}{m}\\)</td><td>z</td></tr></table>"
    "<BLOCK>equation [100, 310, 900, 360]<CHILD>\\[\\text{<script>window.__pwned='math'"
    "</script>} + \\href{javascript:window.__pwned='href'}{x}\\]"
    "<BLOCK>code [100, 370, 900, 420]<CHILD>```html\n<script>window.__pwned='code'</script>\n```"
    "<BLOCK>image [100, 430, 500, 600]"
    '<BLOCK>image_caption [100, 610, 500, 630]<CHILD>Figure 1 <b onmouseover="window.__pwned='
    "'caption'\">bold</b>"
    "<BLOCK>text [100, 640, 900, 680]<CHILD>Inline \\( \\text{<img src=x onerror="
    "window.__pwned='inline'>} \\) and $5 <script src=\"http://127.0.0.1:9/x.js\"></script>"
)


@dataclass
class Loaded:
    page: object
    messages: list[str] = field(default_factory=list)  # console errors/warnings, page errors
    requests: list[str] = field(default_factory=list)


def _convert(srv: FakeHPDServer, inputs: list[Path], out: Path, **kw) -> None:
    api.convert(
        [str(i) for i in inputs], out, engine="openai", server=srv.url, workers=1,
        progress=Progress(), **kw,
    )  # fmt: skip


def _review(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpdparse", "review", str(out), *args],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def load(browser):
    contexts = []

    def open_(path: Path, width: int = 1400) -> Loaded:
        context = browser.new_context(offline=True, viewport={"width": width, "height": 900})
        contexts.append(context)
        page = context.new_page()
        loaded = Loaded(page)
        page.on("console", lambda m: m.type in ("error", "warning") and loaded.messages.append(
            f"{m.type}: {m.text}"))  # fmt: skip
        page.on("pageerror", lambda e: loaded.messages.append(f"pageerror: {e}"))
        page.on("request", lambda r: loaded.requests.append(r.url))
        page.goto(path.absolute().as_uri())
        page.wait_for_load_state("load")
        return loaded

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def screenshots(request, tmp_path_factory) -> Path:
    chosen = request.config.getoption("--screenshots")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def samples_run(server, tmp_path_factory) -> Path:
    """The samples converted (with a failed and a truncated page) and reviewed."""
    out = tmp_path_factory.mktemp("review") / "out"
    faults = {("report", 2): "400", ("report", 3): "length"}
    server.clear_log()
    server.fault = lambda r: faults.get(r.page_id)
    try:
        _convert(server, sorted(SAMPLES.iterdir()), out, layout=True)
    finally:
        server.fault = None
    result = _review(out)
    assert result.returncode == 0, result.stderr
    assert "wrote 4 review pages" in result.stdout
    return out


def _only_local(loaded: Loaded) -> None:
    assert all(url.startswith(("file:", "data:")) for url in loaded.requests), loaded.requests


def test_every_page_loads_offline_without_console_errors(
    samples_run: Path, load, screenshots: Path
) -> None:
    pages = [samples_run / "review.html"] + sorted(samples_run.glob("*/*.review.html"))
    assert len(pages) == 5
    for path in pages:
        loaded = load(path)
        assert loaded.messages == [], (path.name, loaded.messages)
        _only_local(loaded)
        loaded.page.screenshot(path=screenshots / f"{path.stem}.png", full_page=True)
        assert (screenshots / f"{path.stem}.png").stat().st_size > 10_000


def test_tables_and_formulas_are_rendered(samples_run: Path, load) -> None:
    page = load(samples_run / "paper" / "paper.review.html").page
    table = page.locator("#b-p1-9 table")
    assert table.locator('td[rowspan="2"]').inner_text() == "Model"
    assert table.locator('td[colspan="2"]').inner_text() == "Score"
    assert page.locator("#b-p1-9 table tr").count() == 4
    fraction = page.locator("#b-p2-7 math mfrac")
    assert fraction.count() == 1
    box = fraction.bounding_box()
    assert box is not None and box["height"] > 15  # laid out as a fraction, not as text
    assert page.locator("#b-p1-4 math msup").count() == 3
    text = " ".join(page.locator(".blk .md").all_inner_texts())
    assert "\\frac" not in text and "^{2}" not in text and "$" not in text


def test_clicking_a_box_highlights_its_block_and_back(samples_run: Path, load) -> None:
    page = load(samples_run / "report" / "report.review.html").page
    page.click("#x-p1-0 rect")
    assert "sel" in page.locator("#b-p1-0").get_attribute("class").split()
    page.locator("#x-p3-1 rect").scroll_into_view_if_needed()
    page.click("#x-p3-1 rect")  # the table on page 3
    block = page.locator("#b-p3-1")
    assert "sel" in block.get_attribute("class").split()
    assert "sel" not in page.locator("#b-p1-0").get_attribute("class").split()
    assert block.is_visible() and block.locator("table").count() == 1
    in_view = page.evaluate(
        "() => { const r = document.getElementById('b-p3-1').getBoundingClientRect();"
        " return r.bottom > 0 && r.top < window.innerHeight; }"
    )
    assert in_view
    page.hover("#b-p1-2")
    assert "hl" in page.locator("#x-p1-2").get_attribute("class").split()
    page.click("#b-p1-3")
    assert "sel" in page.locator("#x-p1-3").get_attribute("class").split()


def test_failed_and_truncated_pages_are_shown(samples_run: Path, load) -> None:
    page = load(samples_run / "report" / "report.review.html").page
    assert "failed" in page.locator("#page-2 .banner").inner_text()
    assert "token limit" in page.locator("#page-3 .banner").inner_text()
    assert page.locator("#page-2 image").count() == 1  # the page image is there
    index = load(samples_run / "review.html").page
    row = index.locator("tr.doc", has_text="report")
    assert row.locator("td.status").inner_text() == "partial"
    assert row.locator("td.bad").inner_text() == "1"
    assert row.locator("td.warn").inner_text() == "1"
    assert "page 2: " in index.locator("tr.detail").inner_text()
    index.click("a.review >> text=paper")
    index.wait_for_load_state("load")
    assert index.url.endswith("/paper/paper.review.html")
    assert index.locator("h1").inner_text() == "paper"


def test_a_hostile_page_runs_no_script(tmp_path: Path, load, screenshots: Path) -> None:
    source = tmp_path / "hostile.pdf"
    shutil.copy(SAMPLES / "memo.pdf", source)
    out = tmp_path / "out"
    with FakeHPDServer(responder=lambda request: HOSTILE_STREAM) as hostile:
        _convert(hostile, [source], out)
    assert _review(out).returncode == 0
    loaded = load(out / "hostile" / "hostile.review.html")
    page = loaded.page
    loaded.page.screenshot(path=screenshots / "hostile.review.png", full_page=True)
    page.hover("#b-p1-6")  # the caption whose <b> had onmouseover
    page.click("#x-p1-1 rect")
    assert page.evaluate("() => window.__pwned") is None
    assert loaded.messages == []  # nothing was even blocked: it never became markup
    _only_local(loaded)
    assert page.locator("script").count() == 1  # ours
    assert page.locator("iframe, object, embed, main img:not(.crop), main svg svg").count() == 0
    handlers = page.evaluate(
        "() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
        ".filter(a => a.name.startsWith('on') || /javascript:/i.test(a.value)).length"
    )
    assert handlers == 0
    text = page.locator("#b-p1-1").inner_text()
    assert "<img src=x onerror=" in text and "javascript:" in text  # shown as text, escaped
    assert page.locator("#b-p1-2 td[rowspan='2']").count() == 1  # the table survives, clean
    assert page.locator("#b-p1-3 math").count() == 1
    # Defence in depth: markup injected after load still cannot run inline script.
    injected = page.evaluate(
        """() => new Promise(resolve => {
            document.body.insertAdjacentHTML(
                'beforeend', '<img id="injected" src="data:,x" onerror="window.__csp = 1">');
            document.getElementById('injected').addEventListener(
                'error', () => resolve(window.__csp === undefined ? 'blocked' : 'ran'));
        })"""
    )
    assert injected == "blocked"


# Per-page log-probabilities the fake server gives (every token the same): page confidences.
PAGE_LOGPROBS = {
    ("report", 1): -2.0,  # 0.14
    ("report", 2): -0.05,  # 0.95
    ("report", 3): -1.0,  # 0.37
    ("memo", 1): -0.5,  # 0.61
    ("paper", 1): -0.01,  # 0.99
    ("paper", 2): -3.0,  # 0.05
}
BY_CONFIDENCE = ["paper 2", "report 1", "report 3", "memo 1", "report 2", "paper 1"]
BY_PAGE = ["memo 1", "paper 1", "paper 2", "report 1", "report 2", "report 3"]


def _page_order(index) -> list[str]:
    cells = index.locator("#pages tbody tr td:nth-child(2)").all_inner_texts()
    return [cell.replace(" · page ", " ") for cell in cells]


def test_the_index_sorts_pages_by_confidence_and_by_page_number(
    server: FakeHPDServer, tmp_path: Path, load
) -> None:
    out = tmp_path / "out"
    server.clear_log()
    server.logprob = lambda request: PAGE_LOGPROBS[request.page_id]
    try:
        _convert(server, [SAMPLES / f"{s}.pdf" for s in ("report", "memo", "paper")], out)
    finally:
        server.logprob = None
    assert _review(out).returncode == 0
    loaded = load(out / "review.html")
    index = loaded.page
    assert _page_order(index) == BY_CONFIDENCE  # lowest first by default
    confidences = index.locator("#pages tbody tr td:nth-child(1)").all_inner_texts()
    assert confidences == sorted(confidences) and confidences[0] == "0.05"
    index.click("#pages th[data-key=order] button")
    assert _page_order(index) == BY_PAGE
    assert index.locator("#pages th[data-key=order]").get_attribute("aria-sort") == "ascending"
    index.click("#pages th[data-key=order] button")
    assert _page_order(index) == BY_PAGE[::-1]
    index.click("#pages th[data-key=confidence] button")
    assert _page_order(index) == BY_CONFIDENCE
    index.click("#pages th[data-key=confidence] button")
    assert _page_order(index) == BY_CONFIDENCE[::-1]
    index.click("#pages a >> text=paper · page 2")
    index.wait_for_load_state("load")
    assert index.url.endswith("/paper/paper.review.html#page-2")
    # The documents table: least confident document first; by name on a click.
    documents = load(out / "review.html").page
    names = documents.locator("#documents a.review").all_inner_texts()
    assert names == ["paper", "report", "memo"]
    documents.click("#documents th[data-key=name] button")
    assert documents.locator("#documents a.review").all_inner_texts() == ["memo", "paper", "report"]
    assert loaded.messages == []
