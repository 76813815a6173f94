"""What only the Markdown store promises: files that round-trip every record exactly, file
names safe for every key, a folder that stays clean under git, and batches that a crash leaves
whole or absent."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory import MemoryDraft, MemoryFilter, MemoryPatch
from workers.memory.model.planning import WriteRules, history_entry, new_item
from workers.memory.ports import AuditEvent
from workers.memory.stores.markdown import MarkdownMemoryStore
from workers.memory.stores.markdown.fileformat import MalformedFileError, parse, render, to_item
from workers.memory.stores.markdown.layout import decode_name, encode_name

pytestmark = pytest.mark.anyio

CONTENTS: list[Any] = [
    "plain text",
    "",
    "ends with two newlines\n\n",
    "windows\r\nline ends\r\n",
    "nul\x00byte",
    "---\nlooks: like front matter\n---\n",
    '```json\n"looks like a json block"\n```',
    {"z": 1, "a": [1, 2.5, None, True, "x"], "nested": {"k": {}}},
    [],
    None,
    0,
    -1.25,
    False,
    "emoji 😀 ünïcödé",
]
KEYS = [
    "plain",
    "a/b",
    "..",
    ".hidden",
    "with space",
    "ünï/cödé",
    "a~b",
    "%41",
    "x" * 400,
    "x" * 399 + "y",
]


async def test_every_content_round_trips_exactly_through_the_files(tmp_path: Path) -> None:
    drafts = [MemoryDraft(content, key=f"c{n}") for n, content in enumerate(CONTENTS)]
    async with MarkdownMemoryStore(tmp_path) as store:
        written = await store.write(drafts, "create")
    async with MarkdownMemoryStore(tmp_path) as fresh:  # reads the files, nothing else
        read = await fresh.get([item.id for item in written], [], "default")
    assert {item.id: item for item in read} == {item.id: item for item in written}
    by_key = {item.key: item.content for item in read}
    for n, content in enumerate(CONTENTS):
        assert type(by_key[f"c{n}"]) is type(content)
        if isinstance(content, dict):  # the key order too
            assert list(by_key[f"c{n}"]) == list(content)


def test_file_names_are_safe_and_reversible() -> None:
    for key in KEYS:
        name = encode_name(key)
        assert not name.startswith(".")
        assert "/" not in name
        assert len(name) <= 150
        if len(key) < 100:
            assert decode_name(name) == key
        else:  # cut, with a hash: never read back as a key (the front matter says it)
            assert decode_name(name) is None
    assert encode_name("x" * 400) != encode_name("x" * 399 + "y")


async def test_every_key_gets_its_own_file_and_comes_back(tmp_path: Path) -> None:
    async with MarkdownMemoryStore(tmp_path) as store:
        await store.write([MemoryDraft(key, key=key, namespace="ns/..") for key in KEYS], "create")
    files = sorted(path.name for path in (tmp_path / "ns%2F..").iterdir())
    assert len(files) == len(KEYS)
    async with MarkdownMemoryStore(tmp_path) as fresh:
        found = await fresh.get([], KEYS, "ns/..")
    assert sorted(item.content for item in found) == sorted(KEYS)


async def test_a_superseded_record_shares_its_key_in_a_file_of_its_own(tmp_path: Path) -> None:
    async with MarkdownMemoryStore(tmp_path) as store:
        (old,) = await store.write([MemoryDraft("old fact", key="fact", trust="user")], "create")
        rules = WriteRules(supersede=frozenset({0}), ranks={"user": 1})
        (new,) = await store.write(
            [MemoryDraft("new fact", key="fact", trust="user")], "create", rules=rules
        )
    names = sorted(path.name for path in (tmp_path / "default").iterdir())
    assert names == ["fact.md", f"fact~{old.id}.md"]
    async with MarkdownMemoryStore(tmp_path) as fresh:
        (active, retired) = await fresh.get([], ["fact"], "default")
    assert (active.id, active.status, active.supersedes) == (new.id, "active", old.id)
    assert (retired.id, retired.status) == (old.id, "superseded")


def _git(root: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


async def test_the_folder_stays_clean_under_git(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    _git(root, "init", "-q")
    async with MarkdownMemoryStore(root) as store:
        a, b = await store.write(
            [MemoryDraft("alpha", key="a"), MemoryDraft("beta", key="b")], "create"
        )
        await store.update([MemoryPatch(a.id, content="alpha two")])
        await store.delete([b.id])
    status = _git(root, "status", "--porcelain", "--untracked-files=all").split("\n")
    assert sorted(line[3:] for line in status if line) == [
        ".ditto/.gitignore",
        ".ditto/history.jsonl",
        "default/a.md",
    ]  # no temporary file, journal or lock; the cursor key stays out of git
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "memory")

    async with MarkdownMemoryStore(root) as store:
        await store.update([MemoryPatch(a.id, content="alpha three")])
    diff = _git(root, "diff", "--numstat", "--", "default/a.md").split()
    # One record changed: its version, updated_at and body lines, nothing else moves.
    assert diff[:2] == ["3", "3"], diff


async def test_a_batch_committed_before_a_crash_is_completed_on_open(tmp_path: Path) -> None:
    async with MarkdownMemoryStore(tmp_path) as store:
        (item,) = await store.write([MemoryDraft("before", key="k")], "create")
    # What a writer killed right after its commit point leaves: the new file still under its
    # temporary name, and the journal naming the rename and the history line to append.
    after = msgspec.structs.replace(item, content="after", version=2)
    temp = tmp_path / "default" / ".k.md.0000.ditto-tmp"
    temp.write_bytes(render(after))
    history = tmp_path / ".ditto" / "history.jsonl"
    line = msgspec.json.encode(history_entry(after, "update", after.updated_at)) + b"\n"
    journal = {
        "renames": [["default/.k.md.0000.ditto-tmp", "default/k.md"]],
        "deletes": [],
        "log": ".ditto/history.jsonl",
        "offset": history.stat().st_size,
        "lines": line.decode(),
    }
    (tmp_path / ".ditto" / "journal.json").write_bytes(msgspec.json.encode(journal))

    async with MarkdownMemoryStore(tmp_path) as store:
        (read,) = await store.get([item.id], [], "default")
        assert (read.content, read.version) == ("after", 2)
        assert [e.change for e in await store.history(item.id)] == ["create", "update"]
    assert not temp.exists()
    assert not (tmp_path / ".ditto" / "journal.json").exists()


async def test_a_batch_that_crashed_before_its_commit_point_never_happened(
    tmp_path: Path,
) -> None:
    async with MarkdownMemoryStore(tmp_path) as store:
        (item,) = await store.write([MemoryDraft("before", key="k")], "create")
    temp = tmp_path / "default" / ".k.md.0000.ditto-tmp"
    temp.write_bytes(b"---\nhalf a fi")  # no journal: the batch had not committed
    async with MarkdownMemoryStore(tmp_path) as store:
        (read,) = await store.get([item.id], [], "default")
        assert read.content == "before"
        assert await store.count(MemoryFilter()) == 1
    assert not temp.exists()


async def test_a_second_store_on_the_folder_follows_a_supersession(tmp_path: Path) -> None:
    rules = WriteRules(supersede=frozenset({0}), ranks={"user": 1})
    async with MarkdownMemoryStore(tmp_path) as one, MarkdownMemoryStore(tmp_path) as two:
        (old,) = await one.write([MemoryDraft("old fact", key="fact", trust="user")], "create")
        assert [item.id for item in await two.get([], ["fact"], "default")] == [old.id]
        (new,) = await one.write(
            [MemoryDraft("new fact", key="fact", trust="user")], "create", rules=rules
        )
        seen = await two.get([], ["fact"], "default")
        assert [(item.id, item.status) for item in seen] == [
            (new.id, "active"),
            (old.id, "superseded"),
        ]
        assert [e.change for e in await two.history(old.id)] == ["create", "supersede"]


async def test_a_rejected_claim_copied_in_is_gone_without_a_delete_of_its_own(
    tmp_path: Path,
) -> None:
    """A rejected claim's history ends with ``reject`` (rejecting deletes it): a folder that
    takes that history (a copy, an import) has no file for it and adds no ``delete``."""
    now = datetime(2026, 1, 2, tzinfo=UTC)
    claim = msgspec.structs.replace(new_item(MemoryDraft("a claim"), now), status="quarantined")
    rejected = msgspec.structs.replace(claim, version=2, updated_at=now)
    entries = [history_entry(claim, "create", now), history_entry(rejected, "reject", now)]
    async with MarkdownMemoryStore(tmp_path) as store:
        assert await store.restore_history(entries) == 2
    async with MarkdownMemoryStore(tmp_path) as reopened:
        assert [e.change for e in await reopened.history(claim.id)] == ["create", "reject"]


async def test_a_second_store_reads_the_audit_log_after_a_purge(tmp_path: Path) -> None:
    def event(at: datetime, node: str) -> AuditEvent:
        return AuditEvent(at, "alice", node, ["id"], "allow")

    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
    async with MarkdownMemoryStore(tmp_path) as one, MarkdownMemoryStore(tmp_path) as two:
        await one.append_audit([event(early, "MEMORY.GET"), event(early, "MEMORY.QUERY")])
        assert len(await two.audit_log()) == 2
        assert await one.purge_audit(late) == 2
        await one.append_audit([event(late, "MEMORY.SEARCH"), event(late, "MEMORY.WRITE")])
        assert [entry.node for entry in await two.audit_log()] == [
            "MEMORY.SEARCH",
            "MEMORY.WRITE",
        ]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(content=JSON, key=st.text(min_size=1, max_size=300), summary=st.none() | st.text())
@settings(max_examples=200, deadline=None)
def test_any_record_reads_back_from_its_file_exactly(
    content: Any, key: str, summary: str | None
) -> None:
    item = new_item(MemoryDraft(content, key=key, summary=summary), datetime.now(UTC))
    read = parse(render(item))
    assert to_item(read.fields, read.content) == item
    assert type(read.content) is type(content)
    name = encode_name(key)
    assert decode_name(name) in (key, None)  # None only for a long key, cut and hashed
    assert len(name) <= 150
    assert not name.startswith(".")
    assert "/" not in name


@pytest.mark.parametrize(
    ("written", "field", "value", "content"),
    [
        (b"---\ncategory: 'daily'\n---\nhi\n", "category", "daily", "hi"),
        (b"---\nsummary: 'it''s'\n---\nhi\n", "summary", "it's", "hi"),
        (b"\xef\xbb\xbf---\ncategory: daily\n---\nhi\n", "category", "daily", "hi"),
        (b"---\r\ncategory: daily\r\n---\r\na\r\nb\r\n", "category", "daily", "a\r\nb"),
        (b"---\nsummary: [draft] plan\n---\nhi\n", "summary", "[draft] plan", "hi"),
    ],
    ids=["yaml single quotes", "yaml quote in quotes", "byte-order mark", "crlf", "bracket"],
)
def test_front_matter_as_a_person_or_an_editor_writes_it(
    written: bytes, field: str, value: str, content: str
) -> None:
    read = parse(written)
    assert msgspec.json.decode(read.fields[field]) == value
    assert read.content == content


def test_an_unclosed_quote_in_the_front_matter_is_malformed() -> None:
    with pytest.raises(MalformedFileError, match="line 2: a quoted value is not closed"):
        parse(b'---\nid: "oops\n---\nhi\n')
