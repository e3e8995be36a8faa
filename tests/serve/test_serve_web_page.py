"""The web page at / in a real headless Chromium (Debian's package, driven by Playwright) against
a real `hpdparse serve` (torch engine, tiny checkpoint, an API key): the key asked for, an upload
through the file input with options (and files dropped), its progress to done, the rendered
Markdown (paper.pdf has an HTML table and display formulas with the tiny checkpoint), the zip,
the review page, the listing in a fresh tab, one-line errors, cancel, delete. The page asks
nothing of any other origin.

Screenshots go to --screenshots DIR (default: this run's pytest tmp folder)."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

import httpx

from tests.helpers.paths import SAMPLES
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.serving import Served, serve_process
from tests.review.test_review_browser import CHROMIUM_ARGS

KEY = "web-page-key"
SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0", "--api-key", KEY]
SAMPLE = SAMPLES / "paper.pdf"
WAIT_MS = PATIENCE_SECONDS * 1000


@dataclass
class Tab:
    page: object
    problems: list[str] = field(default_factory=list)  # script errors, CSP refusals
    foreign: list[str] = field(default_factory=list)  # requests to anywhere but the server


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


@pytest.fixture(scope="module")
def served(browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    stderr = tmp_path_factory.mktemp("serve-web-page") / "stderr.txt"
    with serve_process(SERVER, stderr) as served:
        yield served


@pytest.fixture(scope="module")
def screenshots(request, tmp_path_factory) -> Path:
    chosen = request.config.getoption("--screenshots")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def open_tab(browser, served: Served):
    contexts = []

    def open_() -> Tab:
        context = browser.new_context(accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        tab = Tab(page)
        context.on("console", lambda m: _is_problem(m) and tab.problems.append(m.text))
        page.on("pageerror", lambda e: tab.problems.append(f"pageerror: {e}"))
        context.on(
            "request",
            lambda r: (
                r.url.startswith((served.base + "/", "blob:", "about:", "data:image/png;"))
                or tab.foreign.append(r.url)
            ),
        )
        page.goto(served.base + "/")
        page.wait_for_load_state("load")
        return tab

    yield open_
    for context in contexts:
        context.close()


def _is_problem(message) -> bool:
    """A console error but Chromium's line for each error answer (the page shows those)."""
    return message.type == "error" and not message.text.startswith("Failed to load resource")


def _enter_key(tab: Tab, key: str = KEY) -> None:
    tab.page.fill("#key", key)
    tab.page.press("#key", "Enter")  # a change: the list is read again with the key


def _get(served: Served, path: str) -> httpx.Response:
    """What a script with the key gets: the page's answers checked beside the page."""
    with served.client(timeout=60) as client:
        return client.get(served.base + path, headers={"Authorization": f"Bearer {KEY}"})


@pytest.fixture(scope="module")
def converted(open_tab) -> tuple[Tab, str]:
    """paper.pdf uploaded through the page (tables as HTML, headers kept) and done."""
    tab = open_tab()
    page = tab.page
    # the page's CSP allows no eval: waits are selectors, never wait_for_function
    page.wait_for_selector("#error", state="visible")  # it is hidden while empty
    assert "API key" in page.text_content("#error")
    _enter_key(tab)
    page.wait_for_selector("#error", state="hidden")
    page.set_input_files("#files", str(SAMPLE))
    page.select_option("#opt-table_format", "html")
    page.check("#opt-keep_headers")
    page.click("#upload")
    row = page.wait_for_selector("#docs tr[data-id]")
    doc_id = row.get_attribute("data-id")
    page.wait_for_selector(f'tr[data-id="{doc_id}"][data-status="done"]', timeout=WAIT_MS)
    assert page.text_content(f'tr[data-id="{doc_id}"] td.name') == SAMPLE.name
    assert page.text_content("#count") == "1 document"
    return tab, doc_id


def test_the_upload_carries_the_key_and_the_options(converted, served: Served) -> None:
    tab, doc_id = converted
    answer = _get(served, f"/v1/documents/{doc_id}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "done" and body["name"] == SAMPLE.name
    assert body["options"]["table_format"] == "html" and body["options"]["keep_headers"] is True
    assert body["options"]["math"] == "dollar" and body["options"]["docling"] is False
    pages = tab.page.text_content(f'tr[data-id="{doc_id}"] td.pages')
    assert pages == f"{body['pages']['done']}/{body['pages']['total']}" == "2/2"


def test_the_rendered_markdown_has_the_table_and_the_formulas(converted, screenshots) -> None:
    tab, doc_id = converted
    page = tab.page
    page.click(f'tr[data-id="{doc_id}"] button[data-action="view"]')
    page.wait_for_selector("#viewer table")
    assert page.get_attribute("#viewer", "data-id") == doc_id
    assert page.text_content("#viewing") == SAMPLE.name
    cells = page.eval_on_selector_all("#viewer table td", "cells => cells.map(c => c.textContent)")
    assert {"Model", "Score", "Base", "93"} <= set(cells)
    assert page.get_attribute("#viewer td:has-text('Model')", "rowspan") == "2"
    assert page.eval_on_selector_all("#viewer math", "m => m.length") >= 2
    assert page.locator("#viewer h1").text_content() == "A Small Study of Layout Models"
    # the figure's crop came embedded in the HTML, and the browser decoded it
    assert "images/page-0002-figure-01.png" not in page.text_content("#viewer")
    sizes = page.eval_on_selector_all(
        "#viewer img", "images => images.map(i => [i.naturalWidth, i.naturalHeight])"
    )
    assert len(sizes) == 1 and min(sizes[0]) > 0, sizes
    assert page.get_attribute("#viewer img", "src").startswith("data:image/png;base64,")
    page.screenshot(path=screenshots / "web-page.png", full_page=True)


def test_the_zip_link_downloads_the_documents_folder(converted, tmp_path: Path) -> None:
    tab, doc_id = converted
    with tab.page.expect_download() as info:
        tab.page.click(f'tr[data-id="{doc_id}"] button[data-action="zip"]')
    download = info.value
    assert download.suggested_filename == "paper.zip"
    target = tmp_path / "paper.zip"
    download.save_as(target)
    assert zipfile.is_zipfile(target)
    with zipfile.ZipFile(target) as archive:
        names = set(archive.namelist())
        markdown = archive.read("paper/paper.md").decode()
    assert {"paper/paper.md", "paper/paper.json", "paper/images/page-0002-figure-01.png"} <= names
    assert "<table>" in markdown and "$$" in markdown


def test_the_review_page_opens_in_a_new_tab(converted) -> None:
    tab, doc_id = converted
    with tab.page.context.expect_page(timeout=WAIT_MS) as info:
        tab.page.click(f'tr[data-id="{doc_id}"] button[data-action="review"]')
    review = info.value
    review.wait_for_url(re.compile("^blob:"), timeout=WAIT_MS)
    review.wait_for_selector("section.page", timeout=WAIT_MS)
    assert review.locator("section.page").count() == 2
    assert review.locator("svg image").count() == 2  # the page images, inlined
    review.close()


def test_a_fresh_tab_lists_earlier_documents_for_its_key_only(converted, open_tab) -> None:
    _, doc_id = converted
    stranger = open_tab()
    _enter_key(stranger, "not-a-key")
    stranger.page.wait_for_selector("#error:has-text('invalid API key')")
    assert stranger.page.text_content("#error") == "invalid API key"
    assert stranger.page.locator("#docs tr").count() == 0
    fresh = open_tab()
    _enter_key(fresh)
    fresh.page.wait_for_selector(f'tr[data-id="{doc_id}"][data-status="done"]')
    assert fresh.page.text_content("#count") == "1 document"
    assert fresh.page.text_content("#error") == ""


def test_an_error_answer_shows_its_one_line_message(converted, open_tab, served) -> None:
    _, doc_id = converted
    tab = open_tab()
    _enter_key(tab)
    tab.page.wait_for_selector(f'tr[data-id="{doc_id}"]')
    tab.page.set_input_files("#files", str(SAMPLE))
    tab.page.fill("#opt-pages", "7-x")
    tab.page.click("#upload")
    tab.page.wait_for_selector("#error", state="visible")
    message = tab.page.text_content("#error")
    assert message.startswith("pages: ") and "\n" not in message
    assert tab.page.locator("#docs tr").count() == 1  # nothing was accepted
    assert _get(served, "/v1/documents").json()["total"] == 1


def test_dropped_files_are_chosen(open_tab) -> None:
    page = open_tab().page
    assert page.is_disabled("#upload")
    dropped = page.evaluate_handle(
        """() => {
        const data = new DataTransfer();
        data.items.add(new File(["%PDF-1.4"], "dropped.pdf", { type: "application/pdf" }));
        return data;
    }"""
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": dropped})
    assert page.text_content("#chosen") == "dropped.pdf"
    assert page.is_enabled("#upload")


def test_rendered_html_is_made_inert_before_it_is_shown(open_tab) -> None:
    """The server's renderer writes no raw HTML (tests/review); the page strips what would act
    all the same, as it holds the key, and keeps no image but embedded PNG data."""
    page = open_tab().page
    hostile = (
        '<p onclick="x()">text <a href="javascript:x()">a</a> <a href="#t">b</a></p>'
        '<script>x()</script><img src="x" onerror="x()"><iframe src="x"></iframe>'
        '<table><tr><td rowspan="2" onmouseover="x()">c</td></tr></table>'
        '<math display="block"><mi href="data:text/html,x">y</mi></math><style>p{}</style>'
        '<img class="crop" src="data:image/png;base64,iVBORw0KGgo=" onload="x()" title="t">'
        '<img src="data:image/svg+xml,<svg/>"><img src="data:image/png;base64,A B">'
    )
    shown = page.evaluate("html => inert(html).map(n => n.outerHTML || n.textContent)", hostile)
    assert shown == [
        '<p>text <a>a</a> <a href="#t">b</a></p>',
        '<table><tbody><tr><td rowspan="2">c</td></tr></tbody></table>',
        '<math display="block"><mi>y</mi></math>',
        '<img src="data:image/png;base64,iVBORw0KGgo=" alt="">',
    ]


def test_cancel_ends_a_document_cancelled(converted, served: Served) -> None:
    tab, _ = converted
    page = tab.page
    page.set_input_files("#files", str(SAMPLES / "report.pdf"))
    page.click("#upload")
    row = page.wait_for_selector('#docs tr[data-id]:has-text("report.pdf")')
    doc_id = row.get_attribute("data-id")
    page.click(f'tr[data-id="{doc_id}"] button[data-action="cancel"]')
    page.wait_for_selector(f'tr[data-id="{doc_id}"][data-status="cancelled"]', timeout=WAIT_MS)
    assert _get(served, f"/v1/documents/{doc_id}").json()["status"] == "cancelled"
    page.click(f'tr[data-id="{doc_id}"] button[data-action="delete"]')
    page.wait_for_selector(f'tr[data-id="{doc_id}"]', state="detached")
    assert _get(served, f"/v1/documents/{doc_id}").status_code == 404


def test_delete_removes_the_document(converted, served: Served) -> None:
    tab, doc_id = converted
    tab.page.click(f'tr[data-id="{doc_id}"] button[data-action="delete"]')
    tab.page.wait_for_selector(f'tr[data-id="{doc_id}"]', state="detached")
    assert tab.page.inner_html("#viewer") == ""  # it was the one shown
    assert tab.page.text_content("#count") == "0 documents"
    assert _get(served, f"/v1/documents/{doc_id}").status_code == 404


def test_the_page_used_nothing_but_the_server(converted, open_tab) -> None:
    tab, _ = converted
    assert tab.foreign == [] and tab.problems == [], (tab.foreign, tab.problems)


def test_the_page_and_the_description_need_no_key(served: Served) -> None:
    with served.client(timeout=60) as client:
        page = client.get(served.base + "/")
        spec = client.get(served.base + "/openapi.json")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text == resources.files("hpdparse.serve.documents").joinpath("page.html").read_text(
        "utf-8"
    )
    assert spec.status_code == 200
    described = resources.files("hpdparse.serve.documents").joinpath("openapi.json")
    assert spec.json() == json.loads(described.read_text("utf-8"))
