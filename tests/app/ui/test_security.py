"""The page's guard: the token on every request, CSRF on every change, the headers, escaping
of stored text, and read-only mode."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from ditto.app.ui.security import Guard, csrf_token
from tests.app.ui.conftest import TOKEN, client_for
from tests.app.ui.seed import MARKDOWN_IMAGE, SCRIPT, Seeded


@pytest.mark.parametrize(
    "path", ["/", "/records/x", "/review", "/audit", "/static/ui.css", "/nowhere"]
)
def test_every_request_without_the_token_is_401(seeded: Seeded, path: str) -> None:
    with client_for(seeded) as anonymous:
        answer = anonymous.get(path)
        assert answer.status_code == 401
        assert "needs its token" in answer.text
        assert TOKEN not in answer.text
        wrong = anonymous.get(path, headers={"Authorization": "Bearer not-the-token-at-all"})
        assert wrong.status_code == 401
        anonymous.cookies.set("ditto_ui", TOKEN[:-1] + "x")
        assert anonymous.get(path).status_code == 401
        assert anonymous.post(path, data={"csrf": csrf_token(TOKEN)}).status_code == 401


def test_the_token_in_the_address_sets_a_strict_cookie_and_leaves_the_address(
    seeded: Seeded,
) -> None:
    with client_for(seeded) as browser:
        first = browser.get(f"/?q=tea&token={TOKEN}", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == "/?q=tea"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert browser.get("/?q=tea").status_code == 200  # the cookie is enough now
        assert browser.get(f"/?token={TOKEN}x", follow_redirects=False).status_code == 401
    with client_for(seeded) as script:
        bearer = script.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200


def test_security_headers_on_every_answer(client: TestClient) -> None:
    for answer in (client.get("/"), client.get("/records/missing"), client.get("/static/ui.js")):
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
    refused = client.get("/static/ui.js", headers={"Authorization": "Bearer wrong-token-x"})
    assert refused.status_code == 200  # the cookie still holds; a wrong header adds nothing
    client.cookies.clear()
    refused = client.get("/")
    assert refused.status_code == 401
    assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]


def test_no_inline_script_on_any_page(client: TestClient, seeded: Seeded) -> None:
    for path in ("/", "/?q=tea", f"/records/{seeded.ids['edited']}"):
        html = client.get(path).text
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert scripts == ['<script src="/static/ui.js" defer>']
        assert not re.search(r"<[a-zA-Z][^>]*\son[a-z]+\s*=", html)  # no inline handlers


def test_a_change_without_the_csrf_token_is_refused(client: TestClient, seeded: Seeded) -> None:
    record = seeded.ids["edited"]
    for form in ({}, {"csrf": "0" * 64}, {"csrf": csrf_token("another-token-entirely")}):
        answer = client.post(f"/records/{record}/pin", data=form)
        assert answer.status_code == 403
        assert "CSRF" in answer.text
    as_json = client.post(
        f"/records/{record}/pin",
        content=b'{"csrf": "x"}',
        headers={"content-type": "application/json"},
    )
    assert as_json.status_code == 415
    page = client.get(f"/records/{record}")
    assert "pinned" not in page.text.split("<h1", 1)[1].split("</h1>", 1)[0]


def test_stored_markup_is_shown_as_text(client: TestClient, seeded: Seeded) -> None:
    for key in ("script", "markdown"):
        html = client.get(f"/records/{seeded.ids[key]}").text
        assert "<script>document" not in html
        assert "<img src=x" not in html
        assert 'href="javascript:' not in html
    script_page = client.get(f"/records/{seeded.ids['script']}").text
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in script_page
    markdown_page = client.get(f"/records/{seeded.ids['markdown']}").text
    assert "![pwned](http://127.0.0.1:9/pixel.png)" in markdown_page
    assert '<img src="http://127.0.0.1:9' not in markdown_page
    hits = client.get("/", params={"q": "pwned"}).text
    assert SCRIPT not in hits
    assert "&lt;script&gt;" in hits
    assert MARKDOWN_IMAGE.split(" ")[0] in hits


def test_read_only_hides_and_refuses_changes(seeded: Seeded) -> None:
    record = seeded.ids["edited"]
    with client_for(seeded, read_only=True) as viewer:
        viewer.cookies.set("ditto_ui", TOKEN)
        page = viewer.get(f"/records/{record}").text
        assert "Read-only" in page
        assert f"/records/{record}/forget" not in page
        assert f"/records/{record}/edit" not in page
        for action in ("forget", "pin", "edit"):
            refused = viewer.post(f"/records/{record}/{action}", data={"csrf": csrf_token(TOKEN)})
            assert refused.status_code == 403
            assert "read-only" in refused.text
        assert viewer.get(f"/records/{record}").status_code == 200  # still there


def test_the_redirect_after_the_token_never_leaves_the_site() -> None:
    """``//host/...`` as a path would be a redirect to another site (an HTTP client would
    read it as a host, so the guard is called directly)."""
    sent: list[dict[str, Any]] = []

    async def unreachable(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app behind the guard is not reached")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    guard = Guard(unreachable, token=TOKEN, read_only=False)
    scope = {
        "type": "http",
        "method": "GET",
        "path": "//example.org/x",
        "query_string": f"token={TOKEN}".encode(),
        "headers": [],
    }
    anyio.run(guard, scope, receive, send)
    (location,) = [value for name, value in sent[0]["headers"] if name == b"location"]
    assert (sent[0]["status"], location) == (303, b"/example.org/x")
