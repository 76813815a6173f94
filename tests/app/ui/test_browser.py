"""``ditto ui`` in a real Chromium: a real ``ditto ui`` process on a free port over a SQLite store
of a few thousand records, driven by Playwright. Each test fails on any console error (a script
error, a refused Content-Security-Policy, a failed load) and saves a screenshot of its page;
their folder is printed at the end of the module."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.app.cli.runner import REPO_ROOT
from tests.app.ui.approval import interrupted_run
from tests.app.ui.browser import INSTALL_SECONDS, LAUNCH_ARGS
from tests.app.ui.seed import OPERATOR, Seeded, seed

# The first test may wait for apt-get to install Chromium (the session fixture does it once).
pytestmark = pytest.mark.timeout(INSTALL_SECONDS + 120)

TOKEN = "browser-token-0123456789abcdef"
RECORDS = 3000
_START_SECONDS = 60


@dataclass
class Server:
    url: str
    seeded: Seeded
    shots: Path


@dataclass
class Tab:
    """One page, with what its console said."""

    page: Any
    shots: Path
    errors: list[str] = field(default_factory=list)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_SECONDS
    probe = urllib.request.Request(
        url + "static/ui.css", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"ditto ui exited with {process.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(probe, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)  # polling a starting server, not timing anything
    pytest.fail(f"ditto ui did not answer within {_START_SECONDS} s")


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, chromium: Path
) -> Iterator[Server]:
    """One ``ditto ui`` process for the module, over a store seeded with ``RECORDS`` notes
    (after the session's Chromium is there: installing it may take minutes)."""
    folder = tmp_path_factory.mktemp("ui-browser")
    seeded = anyio.run(seed, folder, RECORDS)
    runs = folder / "runs.sqlite"
    anyio.run(interrupted_run, runs, "run-1")
    shots = tmp_path_factory.mktemp("ui-screenshots")
    port = _free_port()
    command = [
        sys.executable, "-m", "ditto", "ui",
        "--config", str(seeded.config),
        "--port", str(port),
        "--principal", OPERATOR,
        "--checkpoints", str(runs),
        "--graph", "tests.app.ui.approval:approval_graph",
        "--worker", "tests.app.ui.approval:approval_worker",
    ]  # fmt: skip
    environment = {**os.environ, "DITTO_UI_TOKEN": TOKEN, "PYTHONPATH": str(REPO_ROOT)}
    environment.pop("DITTO_CONFIG", None)
    log = folder / "ditto-ui.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_serving(url, process, log)
        yield Server(url, seeded, shots)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert TOKEN not in log.read_text()  # a token from the environment is never echoed
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\nditto ui screenshots: {shots} (its output: {log})")
            for path in sorted(shots.glob("*.png")):
                print(f"  {path}")


@pytest.fixture(scope="module")
def browser(server: Server, chromium: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium), args=LAUNCH_ARGS, headless=True
        )
        yield launched
        launched.close()


@pytest.fixture
def tab(browser: Any, server: Server) -> Iterator[Tab]:
    """A fresh page at 1280 px holding the token's cookie; no console error may happen."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    opened = Tab(page, server.shots)
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
    page.goto(f"{server.url}?token={TOKEN}")
    assert TOKEN not in page.url  # the token leaves the address at once
    yield opened
    context.close()
    assert opened.errors == []


def _no_sideways_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"))


def test_without_the_token_the_page_is_refused(browser: Any, server: Server) -> None:
    context = browser.new_context()
    page = context.new_page()
    answer = page.goto(server.url)
    assert answer.status == 401
    assert "needs its token" in page.content()
    context.close()


def test_search_with_explanations_at_both_widths(tab: Tab, server: Server) -> None:
    page = tab.page
    page.fill("#q", "deploy window tea")
    page.click("details.filters summary")
    page.select_option("select[name=strategy]", "keyword")
    page.press("#q", "Enter")
    page.wait_for_selector("ol.results")
    assert page.locator("li.result").count() == 10
    assert page.locator("dl.explain meter").count() >= 10
    assert "keyword score" in page.inner_text("ol.results")
    tab.shot("search-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    assert _no_sideways_scroll(page)
    tab.shot("search-390")


def test_keyboard_opens_a_record_and_its_history(tab: Tab, server: Server) -> None:
    page = tab.page
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("drain the queue")
    page.keyboard.press("Enter")
    page.wait_for_selector("ol.results")
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.className") == "title"
    focus = page.evaluate(
        "[getComputedStyle(document.activeElement).outlineStyle,"
        " getComputedStyle(document.activeElement).outlineWidth]"
    )
    assert focus == ["solid", "3px"]  # the focus ring a keyboard user follows
    page.keyboard.press("Enter")
    page.wait_for_selector("h2#history-title")
    assert page.locator("li.step").count() == 2
    assert page.locator("pre.diff .add").first.inner_text().startswith("+Drain the queue")
    tab.shot("record-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    assert _no_sideways_scroll(page)
    tab.shot("record-390")


def test_stored_markup_does_not_run(tab: Tab, server: Server) -> None:
    page = tab.page
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    ids = server.seeded.ids
    page.goto(f"{server.url}records/{ids['script']}")
    assert page.title() != "pwned"
    assert "<script>document.title='pwned'</script>" in page.inner_text("pre.content")
    assert page.evaluate("document.querySelectorAll('main script, main img').length") == 0
    page.goto(f"{server.url}records/{ids['markdown']}")
    assert "![pwned](http://127.0.0.1:9/pixel.png)" in page.inner_text("pre.content")
    assert page.title() != "pwned"
    page.goto(f"{server.url}?q=pwned")
    assert page.title() != "pwned"
    assert not [url for url in requested if "127.0.0.1:9/" in url]
    tab.shot("xss-as-text")


def test_accept_a_contested_write(tab: Tab, server: Server) -> None:
    page = tab.page
    contested = server.seeded.ids["contested"]
    page.goto(f"{server.url}review")
    assert page.locator("li.review").count() == 2
    tab.shot("review")
    page.click(f"li[data-record='{contested}'] button[value=accept]")
    page.wait_for_selector("#done")
    assert f"accepted {contested}" in page.inner_text("#done")
    assert page.locator(f"li[data-record='{contested}']").count() == 0
    page.goto(f"{server.url}records/{contested}")
    assert page.inner_text("dl.fields >> nth=1").count("active") >= 1


def test_view_as_another_principal_sees_nothing_private(tab: Tab, server: Server) -> None:
    page = tab.page
    page.goto(f"{server.url}view-as")
    page.fill("#principal", "bob")
    page.click("button:has-text('View as')")
    page.wait_for_selector(".banner.viewing")
    page.goto(f"{server.url}?q=launch")
    shown = page.inner_text("main")
    assert "alice shares the launch checklist" in shown
    assert "diary" not in shown
    tab.shot("view-as-bob")
    page.goto(f"{server.url}records/{server.seeded.ids['private']}")
    assert "NOT_FOUND" in page.inner_text("main")
    tab.errors = [e for e in tab.errors if "status of 404" not in e]  # that page is a 404
    page.click("button:has-text('Stop viewing as bob')")
    assert page.locator(".banner.viewing").count() == 0


def test_answer_an_interrupt(tab: Tab, server: Server) -> None:
    page = tab.page
    page.goto(f"{server.url}runs")
    page.click("a[href='/runs/run-1']")
    page.wait_for_selector("svg.plan")
    assert page.locator("g.node.interrupted").count() == 1
    assert "Publish the <b>launch</b> note?" in page.inner_text("section.interrupts")
    tab.shot("run-waiting")
    page.fill("#answer", "yes")
    page.click("button:has-text('Answer and resume')")
    page.wait_for_selector("#done")
    assert "the run is completed" in page.inner_text("#done")
    assert page.locator("g.node.success").count() == 3
    tab.shot("run-answered")


def test_audit_hygiene_and_workers_pages(tab: Tab, server: Server) -> None:
    page = tab.page
    page.goto(f"{server.url}audit?principal=alice")
    assert page.locator("table.audit tbody tr").count() >= 2
    tab.shot("audit")
    page.goto(f"{server.url}hygiene?preview=1")
    assert "Dry run" in page.inner_text("main")
    tab.shot("hygiene")
    page.goto(f"{server.url}workers")
    assert "MEMORY.SEARCH" in page.inner_text("main")
    tab.shot("workers")
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("audit", "review", "runs/run-1", "workers", "view-as"):
        page.goto(server.url + path)
        assert _no_sideways_scroll(page), path
