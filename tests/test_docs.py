"""The README documents what the code does: its error-code table lists exactly the codes a caller
can receive, and its capability table says exactly which store has what."""

from __future__ import annotations

import re
from pathlib import Path

from ditto.errors import ErrorCode
from workers.memory import InProcessMemoryStore, MarkdownMemoryStore, SqliteMemoryStore
from workers.memory.ports import CAPABILITIES
from workers.memory.stores.mysql import MysqlMemoryStore
from workers.memory.stores.postgres import PostgresMemoryStore

README = Path(__file__).resolve().parents[1] / "README.md"
_CODE_CELL = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    _, found, rest = text.partition(f"\n## {title}\n")
    assert found, f"README.md has no '## {title}' section"
    return rest.split("\n## ", 1)[0]


def _table_codes(section: str) -> list[str]:
    """The first cell of every body row of the section's table, which must be one `CODE`."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header, separator, *body = rows
    assert header.split("|")[1].strip() == "code"
    assert set(separator.replace("|", "").split()) == {"---"}
    codes = []
    for row in body:
        cell = row.split("|")[1].strip()
        match = _CODE_CELL.fullmatch(cell)
        assert match is not None, f"not a `CODE` cell: {row}"
        codes.append(match.group(1))
    return codes


def test_the_error_code_table_lists_every_code_exactly_once() -> None:
    listed = _table_codes(_section("Error codes"))
    duplicates = sorted({code for code in listed if listed.count(code) > 1})
    assert duplicates == []
    assert set(listed) == {code.value for code in ErrorCode}


def test_the_capability_table_says_what_each_store_offers() -> None:
    section = _section("Memory")
    rows = [line for line in section.splitlines() if line.startswith("| `") and "Store` |" in line]
    header = next(line for line in section.splitlines() if line.startswith("| store | core |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")][2:]
    assert columns == list(CAPABILITIES)
    stores = {
        cls.__name__: cls
        for cls in (
            SqliteMemoryStore,
            PostgresMemoryStore,
            MysqlMemoryStore,
            MarkdownMemoryStore,
            InProcessMemoryStore,
        )
    }
    documented = {}
    for row in rows:
        name, core, *cells = (cell.strip() for cell in row.strip("|").split("|"))
        assert core == "yes"
        documented[name.strip("`")] = [
            column for column, cell in zip(columns, cells, strict=True) if cell == "yes"
        ]
    assert documented == {
        name: [column for column, port in CAPABILITIES.items() if issubclass(cls, port)]
        for name, cls in stores.items()
    }
