"""The ``ditto`` command on hostile files: garbage configurations, bombs, broken stores, poisoned
imports and oversized requests.

Properties of every case: no traceback (``invoke_cli`` lets an escaping exception fail the
test, as the console script would print it), one concise error on standard error, the
README's exit code (2 usage or configuration, 3 the store), and a refused import leaves the
store file byte for byte as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from typer.testing import Result

from tests.app.cli.runner import invoke_cli
from workers.memory import MemoryDraft, SqliteMemoryStore

EXIT_USAGE = 2
EXIT_STORE = 3
CONCISE = 400
"""Longest acceptable error line (the longest expected one names a 64-level deep path)."""


def _problem(result: Result) -> str:
    """The one error on standard error, checked: no traceback, a single short problem line.
    Configuration errors print a heading (``invalid configuration:``) and then the problem;
    the README's format for every other error is one ``CODE: message`` line."""
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if lines[:1] == ["invalid configuration:"]:
        lines = lines[1:]
    lines = [line for line in lines if not line.startswith("note:")]
    assert len(lines) == 1, result.stderr
    assert len(lines[0]) <= CONCISE, lines[0]
    return lines[0]


# --------------------------------------------------------------------------- ditto.yaml


def _nested_mappings(depth: int) -> str:
    return "".join(" " * level + "a:\n" for level in range(depth)) + " " * depth + "1\n"


HOSTILE_CONFIGS: dict[str, bytes] = {
    "binary-garbage": bytes(range(256)) * 64,
    "not-utf-8": "runtime:\n  timeout_ms: 5  # café\n".encode("latin-1"),
    "utf-16": "runtime:\n  timeout_ms: 5\n".encode("utf-16"),
    "nul-byte": b"runtime:\n  timeout_ms: \x00\n",
    "billion-laughs": (
        b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + b"".join(
            f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n".encode()
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        )
    ),
    "alias-only": b"runtime: *nowhere\n",
    "merge-key": b"base: {timeout_ms: 5}\nruntime:\n  <<: {timeout_ms: 5}\n",
    "a-list": b"- runtime\n- workers\n",
    "a-scalar": b"just words\n",
    "duplicate-keys": b"runtime: {}\nruntime: {}\n",
    "python-tag": b"runtime: !!python/object/apply:os.system ['true']\n",
    "long-string": b"runtime:\n  timeout_ms: '" + b"9" * 100_000 + b"'\n",
    "bom-and-unknown-section": b"\xef\xbb\xbfruntimes: {}\n",
    "10000-a-colons-on-one-line": b"a: " * 10_000 + b"1\n",
    "10000-nested-mappings": _nested_mappings(10_000).encode(),
    "10000-nested-sequences": b"runtime: " + b"[" * 10_000 + b"]" * 10_000 + b"\n",
    "integer-of-100000-digits": b"runtime:\n  timeout_ms: " + b"9" * 100_000 + b"\n",
}
CONFIG_COMMANDS = (["config", "check"], ["memory", "stats", "--config"])


@pytest.mark.parametrize("command", CONFIG_COMMANDS, ids=lambda command: command[0])
@pytest.mark.parametrize("case", sorted(HOSTILE_CONFIGS))
def test_a_hostile_config_is_one_line_and_exit_2(
    case: str, command: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_bytes(HOSTILE_CONFIGS[case])

    result = invoke_cli(*command, str(config), cwd=tmp_path)

    assert result.exit_code == EXIT_USAGE, result.output
    assert str(config) in _problem(result)
    assert not (tmp_path / "memory.sqlite").exists()  # nothing opened on a refused config


def test_an_empty_config_is_the_library_defaults(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_bytes(b"")
    result = invoke_cli("config", "check", str(config), "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    defaults = invoke_cli("config", "check", "--json", cwd=tmp_path)  # no file: defaults
    assert json.loads(result.stdout)["settings"] == json.loads(defaults.stdout)["settings"]


# --------------------------------------------------------------------------- the store file


def _config_for(tmp_path: Path, database: Path) -> Path:
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    return config


def _valid_line(key: str = "imported") -> dict[str, object]:
    record = {
        "id": f"id-{key}",
        "key": key,
        "namespace": "default",
        "content": "restored",
        "summary": None,
        "category": "core",
        "tags": [],
        "metadata": {},
        "source": None,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "version": 1,
        "usage_count": 0,
        "last_used_at": None,
    }
    return {"type": "record", "record": record}


def _write_lines(path: Path, *lines: dict[str, object] | str | bytes) -> Path:
    with path.open("wb") as file:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            file.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
    return path


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda path: path.mkdir(), "STORE_UNAVAILABLE"),
        (lambda path: path.write_bytes(b"not a database, just text\n" * 200), "STORE_CORRUPT"),
        (lambda path: path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096), "STORE_CORRUPT"),
    ],
    ids=["a-directory", "a-text-file", "a-bad-header"],
)
@pytest.mark.parametrize("command", [["import"], ["audit"], ["list"]], ids=lambda c: c[0])
def test_a_store_path_that_is_no_database_is_one_line_and_exit_3(
    make: Callable[[Path], object], code: str, command: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "memory.sqlite"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    arguments = list(command)
    if command == ["import"]:
        arguments.append(str(_write_lines(tmp_path / "in.jsonl", _valid_line())))

    result = invoke_cli("memory", *arguments, "--config", str(_config_for(tmp_path, path)))

    assert result.exit_code == EXIT_STORE, result.output
    assert _problem(result).startswith(f"{code}: ")
    if before is not None:
        assert path.read_bytes() == before


# --------------------------------------------------------------------------- memory import


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding a few records; the test's ``ditto.yaml`` points at it."""
    database = tmp_path / "memory.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(database) as opened:
            await opened.write(
                [MemoryDraft(content=f"note {n}", key=f"k{n}") for n in range(5)], "create"
            )

    anyio.run(seed)
    _config_for(tmp_path, database)
    return database


def _with(**fields: object) -> dict[str, object]:
    line = _valid_line()
    record = dict(line["record"])  # type: ignore[call-overload]
    record.update(fields)
    return {"type": "record", "record": record}


def _raw_record(field: str, json_value: str) -> str:
    """A record line whose ``field`` holds ``json_value`` verbatim (escapes no encoder writes)."""
    return json.dumps(_with(**{field: "@@"})).replace('"@@"', json_value)


HOSTILE_IMPORTS: dict[str, list[dict[str, object] | str | bytes]] = {
    "truncated-json": ['{"type": "record", "record": {"id": "x"'],
    "not-json": ["this is not json"],
    "binary-bytes": [b"\x00\xff\xfe\x80\x81 garbage \xc3\x28"],
    "not-utf-8": ['{"type": "record", "record": {"id": "caf\xe9"}}'.encode("latin-1")],
    "surrogate-escape-in-key": [_raw_record("key", '"\\ud800"')],
    "surrogate-escape-in-content-key": [_raw_record("content", '{"\\udfff": 1}')],
    "timestamp-after-9999-in-utc": [_with(created_at="9999-12-31T23:59:59-23:59")],
    "timestamp-before-year-1-in-utc": [_with(updated_at="0001-01-01T00:00:00+23:59")],
    "nul-in-key": [_with(key="a\x00b")],
    "nan-content": [_raw_record("content", "NaN")],
    "number-past-float": [_raw_record("content", "1e400")],
    "nested-too-deep": [_raw_record("content", "[" * 100 + "]" * 100)],
    "unknown-field": [_with(colour="red")],
    "wrong-type": [_with(version="one")],
    "history-without-entry": ['{"type": "history"}'],
    "good-then-bad": [_valid_line("first"), _valid_line("second"), "{"],
    "version-past-64-bits": [_with(version=2**70)],
    "usage-count-past-64-bits": [_with(usage_count=2**64)],
    "history-version-past-64-bits": [
        _valid_line(),
        {
            "type": "history",
            "entry": {
                "id": "id-imported",
                "version": 2**64,
                "change": "create",
                "at": "2026-01-01T00:00:00Z",
                "record": _valid_line()["record"],
            },
        },
    ],
    "nested-1000-levels": [_raw_record("content", "[" * 1_000 + "]" * 1_000)],
    "nested-100000-levels": [_raw_record("content", "[" * 100_000 + "]" * 100_000)],
}


def _import(store: Path, lines: list[dict[str, object] | str | bytes]) -> Result:
    source = _write_lines(store.parent / "import.jsonl", *lines)
    return invoke_cli("memory", "import", str(source), "--config", str(store.parent / "ditto.yaml"))


@pytest.mark.parametrize("case", sorted(HOSTILE_IMPORTS))
def test_a_refused_import_is_one_line_exit_2_and_changes_nothing(store: Path, case: str) -> None:
    before = store.read_bytes()

    result = _import(store, HOSTILE_IMPORTS[case])

    assert result.exit_code == EXIT_USAGE, result.output
    assert _problem(result).startswith("INVALID_INPUT: line ")
    assert store.read_bytes() == before


def test_an_empty_import_stores_nothing(store: Path) -> None:
    before = store.read_bytes()
    result = _import(store, [])
    assert result.exit_code == 0, result.output
    assert "imported 0 records" in result.stderr
    assert store.read_bytes() == before


# --------------------------------------------------------------------------- memory get


def test_get_with_10001_keys_is_one_line_and_exit_2(store: Path) -> None:
    before = store.read_bytes()
    keys = [f"k{n}" for n in range(10_001)]

    result = invoke_cli("memory", "get", *keys, "--config", str(store.parent / "ditto.yaml"))

    assert result.exit_code == EXIT_USAGE, result.output
    assert _problem(result).startswith("INVALID_INPUT: ")
    assert "10000" in result.stderr  # names the limit
    assert store.read_bytes() == before


# --------------------------------------------------------------------------- arguments

NOT_UTF_8 = "\udcff"
"""How Python hands over a command-line argument holding the byte 0xFF (``$'\\xff'`` in a
shell): a lone surrogate (PEP 383)."""


@pytest.mark.parametrize(
    "arguments",
    [
        ["get", NOT_UTF_8],
        ["get", "k1", "--namespace", NOT_UTF_8],
        ["search", NOT_UTF_8],
        ["search", "note", "--strategy", NOT_UTF_8],
        ["list", "--namespace", NOT_UTF_8],
        ["list", "--tag", NOT_UTF_8],
        ["list", "--cursor", NOT_UTF_8],
        ["get", "a\x00b"],
        ["search", "x" * 10_001],
    ],
    ids=lambda arguments: "-".join(
        part.encode("ascii", "replace").decode()[:12] for part in arguments
    ),
)
def test_a_hostile_argument_is_one_line_and_exit_2(store: Path, arguments: list[str]) -> None:
    before = store.read_bytes()

    result = invoke_cli("memory", *arguments, "--config", str(store.parent / "ditto.yaml"))

    assert result.exit_code == EXIT_USAGE, result.output
    assert _problem(result).startswith("INVALID_INPUT: ")
    assert store.read_bytes() == before


@pytest.mark.parametrize(
    "arguments",
    [["history", NOT_UTF_8], ["audit", "--principal", NOT_UTF_8]],
    ids=["history", "audit"],
)
def test_a_non_utf_8_argument_to_an_admin_command_is_one_line_and_exit_2(
    store: Path, arguments: list[str]
) -> None:
    before = store.read_bytes()

    result = invoke_cli("memory", *arguments, "--config", str(store.parent / "ditto.yaml"))

    assert result.exit_code == EXIT_USAGE, result.output
    assert _problem(result).startswith("INVALID_INPUT: ")
    assert store.read_bytes() == before
