"""The Search and Record pages over a seeded store, through the app in this process."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from starlette.testclient import TestClient

from ditto.app.bootstrap import build_memory_store, open_runtime
from ditto.app.config import load_config
from ditto.app.ui import UiOptions, create_app
from ditto.app.ui.pages.search import explain_bars
from ditto.app.ui.security import csrf_token
from tests.app.ui.conftest import TOKEN
from tests.app.ui.seed import OPERATOR, Seeded
from workers.memory.ports import AuditLog, require

CSRF = {"csrf": csrf_token(TOKEN)}


def _audit(seeded: Seeded) -> list[Any]:
    async def read() -> list[Any]:
        async with build_memory_store(load_config(seeded.config), existing=True) as store:
            return await require(store, AuditLog).audit_log(after=0, limit=10_000)

    return anyio.run(read)


def test_search_shows_each_hit_with_its_explanation(client: TestClient) -> None:
    page = client.get("/", params={"q": "deploy window tea", "strategy": "keyword"})
    assert page.status_code == 200
    assert page.text.count('class="result"') == 10
    assert "keyword score" in page.text
    assert re.search(r'<meter min="0" max="1" value="1\.0000"', page.text)  # the best hit


def test_search_filters_narrow_the_hits(client: TestClient) -> None:
    page = client.get("/", params={"q": "staging cluster", "namespace": "team", "limit": "50"})
    shown = re.findall(r'class="meta">([^·<]+) ·', page.text)
    assert shown
    assert {namespace.strip() for namespace in shown} == {"team"}
    bad = client.get("/", params={"q": "tea", "created_after": "yesterday"})
    assert bad.status_code == 400
    assert "is not a date" in bad.text


def test_as_of_shows_what_was_true_then(client: TestClient, seeded: Seeded) -> None:
    now = client.get("/", params={"q": "Berlin", "namespace": "default"}).text
    assert "user:city" in now
    before = client.get("/", params={"q": "Berlin", "as_of": "2001-01-01T00:00"}).text
    assert "Nothing matches" in before  # no record was valid yet
    listing = client.get("/", params={"as_of": "2001-01-01T00:00"}).text
    assert "No records here" in listing


def test_why_not_this_one_names_the_stage(client: TestClient, seeded: Seeded) -> None:
    page = client.get("/", params={"q": "tea number", "why": "alice:diary"})
    assert "Why not alice:diary?" in page.text
    assert "not_found" in page.text  # private to alice: the operator may not know it exists
    elsewhere = {"q": "restart the worker", "namespace": "team", "why": seeded.ids["edited"]}
    page = client.get("/", params=elsewhere)
    assert 'class="stage">namespace</strong>' in page.text  # it is in "default"
    assert "Open the record" in page.text


def test_browsing_pages_with_the_stores_cursor(client: TestClient) -> None:
    first = client.get("/", params={"limit": "10"})
    seen = set(re.findall(r'href="/records/([^"]+)"', first.text))
    assert len(seen) == 10
    next_url = re.search(r'href="(/\?[^"]*cursor=[^"]+)" rel="next"', first.text)
    assert next_url is not None
    second = client.get(next_url.group(1).replace("&amp;", "&"))
    later = set(re.findall(r'href="/records/([^"]+)"', second.text))
    assert len(later) == 10
    assert not seen & later


def test_a_record_with_its_history_and_neighbours(client: TestClient, seeded: Seeded) -> None:
    page = client.get(f"/records/{seeded.ids['edited']}").text
    assert "Drain the queue first." in page
    assert page.count('class="step"') == 2  # created, then updated
    assert '<span class="del">-Restart the worker first.</span>' in page
    assert '<span class="add">+Drain the queue first.</span>' in page
    fact = client.get(f"/records/{seeded.ids['fact']}").text
    assert seeded.ids["contested"] in fact
    assert "contests this record" in fact


def test_a_private_record_of_another_principal_is_not_found(
    client: TestClient, seeded: Seeded
) -> None:
    page = client.get(f"/records/{seeded.ids['private']}")
    assert page.status_code == 404
    assert "diary" not in page.text
    assert "private to another principal" in page.text


def test_edit_asks_then_saves_a_new_version_in_the_audit_log(
    client: TestClient, seeded: Seeded
) -> None:
    record = seeded.ids["fact"]
    form = client.get(f"/records/{record}/edit").text
    version = int(re.search(r'name="expected_version" value="(\d+)"', form).group(1))  # type: ignore[union-attr]
    saved = client.post(
        f"/records/{record}/edit",
        data={
            **CSRF,
            "content": "lives in Berlin, Mitte",
            "format": "text",
            "summary": "",
            "tags": "home, city",
            "category": "core",
            "expected_version": str(version),
        },
    )
    assert saved.status_code == 200
    assert "lives in Berlin, Mitte" in saved.text
    assert "saved" in saved.text
    stale = client.post(
        f"/records/{record}/edit",
        data={**CSRF, "content": "lost update", "format": "text", "expected_version": str(version)},
    )
    assert stale.status_code == 409
    assert "changed since" in stale.text
    entries = [e for e in _audit(seeded) if e.node == "MEMORY.UPDATE" and record in e.ids]
    assert [(e.principal, e.decision) for e in entries] == [
        (OPERATOR, "allow"),
        (OPERATOR, "failed"),  # the stale edit: CONFLICT
    ]


def test_pin_archive_and_forget_are_confirmed_first(client: TestClient, seeded: Seeded) -> None:
    record = seeded.ids["markdown"]
    asked = client.get(f"/records/{record}/forget")
    assert "Forget xss:markdown?" in asked.text
    assert client.get(f"/records/{record}").status_code == 200  # asking changed nothing
    pinned = client.post(f"/records/{record}/pin", data=CSRF)
    assert '<span class="tag pin">pinned</span>' in pinned.text
    archived = client.post(f"/records/{record}/archive", data=CSRF)
    assert '<span class="tag">archived</span>' in archived.text
    gone = client.post(f"/records/{record}/forget", data=CSRF)
    assert f"{record} forgotten" in gone.text
    assert client.get(f"/records/{record}").status_code == 404
    nodes = [e.node for e in _audit(seeded) if record in e.ids and e.principal == OPERATOR]
    assert nodes.count("MEMORY.UPDATE") >= 2
    assert "MEMORY.DELETE" in nodes
    assert client.get(f"/records/{record}/explode").status_code == 400


def test_explain_bars_draw_scores_and_say_the_rest() -> None:
    hits = [
        SimpleNamespace(explain={"strategy": "hybrid", "keyword_rank": 1, "keyword_score": 2.0,
                                 "vector_score": None, "fused_score": 0.5, "vector_missing": 3}),
        SimpleNamespace(explain={"keyword_score": 1.0, "vector_score": 0.25, "fused_score": 0.25}),
        SimpleNamespace(explain=None),
    ]  # fmt: skip
    first, second, third = explain_bars(hits)
    rows = {row["name"]: (row["text"], row["bar"]) for row in first}
    assert rows["keyword score"] == ("2", 1.0)
    assert rows["fused score"] == ("0.5", 1.0)
    assert rows["vector score"] == ("—", None)  # the vector leg did not find it
    assert rows["keyword rank"] == ("1", None)
    assert rows["vector missing"] == ("3", None)
    assert rows["strategy"] == ("hybrid", None)
    second_rows = {row["name"]: row["bar"] for row in second}
    assert second_rows == {"keyword score": 0.5, "vector score": 1.0, "fused score": 0.5}
    assert third == []


def test_hybrid_search_shows_every_leg(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'm.sqlite'}'\n"
        "    embedder: {kind: hashing}\n"
    )

    async def write() -> None:
        async with open_runtime(load_config(config)) as runtime:
            notes = [{"content": f"deploy window note {i} about tea"} for i in range(20)]
            (await runtime.invoke("MEMORY.WRITE", {"memories": notes})).unwrap()

    anyio.run(write)
    options = UiOptions(settings=load_config(config), token=TOKEN)
    with TestClient(create_app(options), base_url="http://127.0.0.1") as page:
        page.cookies.set("ditto_ui", TOKEN)
        html = page.get("/", params={"q": "deploy window tea", "strategy": "hybrid"}).text
    assert html.count('class="result"') == 10
    for fact in ("keyword score", "vector score", "fused score"):
        assert f"<dt>{fact}</dt><dd><meter" in html, fact
