"""``ditto memory export`` never harms what exists: it never writes onto the store, never over a
file without ``--force``, and a write that fails (a full disk) leaves no half file behind."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.app.cli.runner import invoke_cli
from workers.memory import MemoryDraft, SqliteMemoryStore


@pytest.fixture
def config(tmp_path: Path) -> Path:
    async def fill() -> None:
        async with SqliteMemoryStore(tmp_path / "memory.sqlite") as store:
            drafts = [MemoryDraft(content="x" * 300, key=f"k{n}") for n in range(1201)]
            await store.write(drafts, "create")

    anyio.run(fill)
    path = tmp_path / "ditto.yaml"
    path.write_text(f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'memory.sqlite'}'\n")
    return path


def records(config: Path) -> int:
    stats = invoke_cli("memory", "stats", "--json", "--config", str(config))
    assert stats.exit_code == 0, stats.stderr
    return int(stats.stdout.split('"records":')[1].split(",")[0])


@pytest.mark.parametrize("target", ["memory.sqlite", "memory.sqlite-wal", "./memory.sqlite"])
def test_export_onto_the_store_itself_is_refused_and_the_store_kept(
    config: Path, target: str
) -> None:
    result = invoke_cli(
        "memory", "export", target, "--force", "--config", str(config), cwd=config.parent
    )
    assert result.exit_code == 2
    assert "is the memory store itself" in result.stderr
    assert records(config) == 1201


def test_export_never_overwrites_a_file_without_force(config: Path) -> None:
    target = config.parent / "notes.txt"
    target.write_text("precious")
    refused = invoke_cli("memory", "export", str(target), "--config", str(config))
    assert refused.exit_code == 2
    assert target.read_text() == "precious"
    forced = invoke_cli("memory", "export", str(target), "--force", "--config", str(config))
    assert forced.exit_code == 0, forced.stderr
    assert len(target.read_text().splitlines()) == 1201


def test_export_into_a_missing_folder_is_a_usage_error(config: Path) -> None:
    result = invoke_cli(
        "memory", "export", str(config.parent / "no" / "out.jsonl"), "--config", str(config)
    )
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def _small_files() -> None:
    # A file-size limit makes the export's writes fail as a full disk would (EFBIG); ignoring
    # SIGXFSZ turns the signal into that error instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_failing_write_leaves_no_half_file_and_one_line(config: Path) -> None:
    target = config.parent / "out.jsonl"
    completed = subprocess.run(
        [sys.executable, "-m", "ditto", "memory", "export", str(target), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_small_files,
    )
    assert completed.returncode == 3, completed.stderr
    assert "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines()[-1].startswith(f"writing {target} failed")
    assert sorted(path.name for path in config.parent.iterdir() if "out.jsonl" in path.name) == []
