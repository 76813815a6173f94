"""``Memory`` refuses what would lose data or hang: a forked child, a store whose file vanished,
a folder that does not exist, a typo in a keyword, an extra or an embedder that is not there.
Each fails at once, with a stable code and a message that names the fix."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ditto import AsyncMemory, DittoError, Memory
from ditto.extras import install_hint

ROOT = Path(__file__).resolve().parents[2]


def _code(call: Callable[[], Any]) -> str:
    with pytest.raises(DittoError) as failure:
        call()
    return failure.value.code


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_is_told_to_open_its_own_memory(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.sqlite") as m:
        m.add("written by the parent", key="k")
        pid = os.fork()
        if pid == 0:  # the child: report through the exit code, never return into pytest
            status = 9  # also when the alarm interrupts a hang (pytest-timeout handles SIGALRM)
            try:
                signal.alarm(20)  # a hang (the old behaviour) ends the child with SIGALRM
                try:
                    m.add("written by the child")
                    status = 1
                except DittoError as exc:
                    status = 2
                    if exc.code == "OPENED_IN_PARENT" and "open a new one in the child" in str(exc):
                        status = 3
                if status == 3:
                    m.close()  # lets go of the parent's threads without waiting for them
                    with Memory(tmp_path / "memory.sqlite") as own:  # what the message says
                        found = own.get("k")
                        ok = found is not None and found.content == "written by the parent"
                        status = 0 if ok else 4
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status), f"the child was killed by signal {os.WTERMSIG(status)}"
        reasons = {1: "add() succeeded", 2: "another error", 4: "reopening failed", 9: "hung"}
        assert os.WEXITSTATUS(status) == 0, reasons.get(os.WEXITSTATUS(status))
        assert m.get("k") is not None  # the parent's Memory is untouched


@pytest.mark.parametrize("vanish", ["folder removed", "file unlinked"])
def test_writes_to_a_vanished_store_fail_and_none_is_acknowledged(
    tmp_path: Path, vanish: str
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    m = Memory(folder / "memory.sqlite")
    m.add("stored before", key="before")
    if vanish == "folder removed":
        shutil.rmtree(folder)
    else:
        (folder / "memory.sqlite").unlink()
    for number in range(10):
        assert _code(lambda n=number: m.add(f"lost {n}")) == "STORE_UNAVAILABLE"
    assert _code(lambda: m.update("before", "changed")) == "STORE_UNAVAILABLE"
    for read in (lambda: m.get("before"), lambda: m.search("stored"), m.get_all):
        assert _code(read) == "STORE_UNAVAILABLE"
    m.close()  # closes: there is nowhere left to write its usage counters


def test_a_missing_folder_is_an_error_unless_create_is_asked(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "dir" / "memory.sqlite"
    for make in (Memory, AsyncMemory):
        with pytest.raises(DittoError) as failure:
            make(path)
        assert failure.value.code == "STORE_UNAVAILABLE"
        message = str(failure.value)
        assert str(path) in message
        assert "create=True" in message
        assert "\n" not in message
    assert not (tmp_path / "typo").exists()
    with Memory(path, create=True) as m:
        m.add("the folder was asked for", key="k")
    assert path.is_file()
    with Memory(tmp_path / "memory.sqlite") as m:  # the file itself is made, as ever
        m.add("hello")


def test_mypy_catches_a_misspelt_keyword(tmp_path: Path) -> None:
    # A module name of its own: mypy's incremental cache (shared by every run in a checkout)
    # otherwise reports a module named typo at the path an earlier run gave it.
    snippet = tmp_path / f"typo_{uuid.uuid4().hex}.py"
    snippet.write_text(
        'from ditto import Memory\n\nm = Memory("memory.sqlite")\nm.add("x", kye="k")\n',
        encoding="utf-8",
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # Only the snippet's lines: an error elsewhere is another test's business.
    errors = [
        line for line in checked.stdout.splitlines() if f"{snippet}:" in line and "error:" in line
    ]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert len(errors) == 1, checked.stdout
    assert 'Unexpected keyword argument "kye"' in errors[0]


_PROBE = """
import json, sys
sys.modules["asyncpg"] = None  # as if the postgres extra were not installed
from ditto import Memory, DittoError
{body}
try:
    make()
    print(json.dumps(None))
except DittoError as exc:
    print(json.dumps([exc.code, str(exc)]))
"""


def _refusal(body: str) -> tuple[str, str] | None:
    script = _PROBE.format(body=textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    return None if found is None else (found[0], found[1])


def test_a_postgres_url_without_the_extra_names_the_install_command() -> None:
    refused = _refusal('make = lambda: Memory("postgresql://ditto@127.0.0.1:1/none")')
    assert refused is not None
    code, message = refused
    assert code == "STORE_UNAVAILABLE"
    assert install_hint("postgres") in message
    assert "\n" not in message


def test_the_configured_postgres_backend_without_the_extra_names_it_too(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: postgres\n", encoding="utf-8")
    refused = _refusal(
        f"""
        from ditto.app.bootstrap import build_memory_store
        from ditto.app.config import load_config

        url = {{"DITTO_WORKER_MEMORY_POSTGRES_URL": "postgresql://ditto@127.0.0.1:1/none"}}
        settings = load_config({str(config)!r}, env=url)
        make = lambda: build_memory_store(settings)
        """
    )
    assert refused is not None
    assert refused[0] == "STORE_UNAVAILABLE"
    assert install_hint("postgres") in refused[1]


@pytest.mark.parametrize("make", [Memory, AsyncMemory])
def test_an_unknown_embedder_is_refused_when_the_memory_is_made(
    tmp_path: Path, make: Callable[..., Any]
) -> None:
    with pytest.raises(DittoError) as failure:
        make(tmp_path / "memory.sqlite", embedder="openai")
    assert failure.value.code == "INVALID_CONFIG"
    assert "'none', 'hashing', 'minilm'" in str(failure.value)
