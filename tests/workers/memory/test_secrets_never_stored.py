"""With the safety stage enforcing, a written secret reaches none of the places a memory
leaves a trace: the SQLite file (and its write-ahead log), history, the audit log, an export
or a log line — whether the secret was redacted, or its kind rejects the write."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from ditto import create_ditto
from tests.app.cli.runner import invoke_cli
from workers.memory import AuditEntry, HistoryEntry, SqliteMemoryStore, create_memory_worker
from workers.memory.policy.config import StageModes, WritePolicy
from workers.memory.policy.safety_rules import SafetyAction, SafetyRules

SECRETS = {
    "api_key": "ghp_" + "x7Kq2Lm9Np4Rs8Tv1Wy6Zb3Cd5Fg0Hj2Kl4Qa",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9."
    + "c2lnbmF0dXJlLWJ5dGVzLWZvci10aGUtdGVzdA",
    "card": "4539 1488 0343 6467",
}


def _traces(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.iterdir() if path.is_file())


async def _write_every_secret(
    database: Path, action: SafetyAction
) -> tuple[list[HistoryEntry], list[AuditEntry]]:
    rules = SafetyRules(actions=dict.fromkeys(SECRETS, action))
    policy = WritePolicy(StageModes(safety="enforce"), safety=rules)
    async with SqliteMemoryStore(database) as store:
        worker = create_memory_worker(store, audit=True, policy=policy)
        async with create_ditto(workers=[worker]) as runtime:
            for kind, secret in SECRETS.items():
                result = await runtime.invoke(
                    "MEMORY.WRITE",
                    {
                        "memories": [
                            {
                                "key": f"note:{kind}",
                                "content": {"text": f"remember this: {secret}"},
                                "summary": f"the {kind} is {secret}",
                                "tags": ["secrets"],
                            }
                        ]
                    },
                    principal="ada",
                )
                assert result.ok is (action is SafetyAction.REDACT), result.error
                assert secret not in repr(result)
            history = [entry async for page in store.history_pages() for entry in page]
            audit = await store.audit_log()
        await store.flush()
    return history, audit


@pytest.mark.parametrize("action", [SafetyAction.REDACT, SafetyAction.REJECT])
def test_a_secret_leaves_no_trace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, action: SafetyAction
) -> None:
    caplog.set_level(logging.DEBUG)
    database = tmp_path / "memory.sqlite"
    history, audit = anyio.run(_write_every_secret, database, action)
    export = tmp_path / "export.jsonl"
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    exported = invoke_cli("memory", "export", str(export), "--history", "--config", str(config))
    assert exported.exit_code == 0, exported.stderr
    stored = _traces(tmp_path)  # the file, its -wal, the export
    for kind, secret in SECRETS.items():
        assert secret.encode() not in stored, kind
        assert secret not in repr(history), kind
        assert secret not in repr(audit), kind
        assert secret not in caplog.text, kind
        assert secret not in exported.stdout + exported.stderr, kind
    if action is SafetyAction.REDACT:
        assert b"[REDACTED:api_key]" in stored
        assert len(history) == len(SECRETS)
    else:
        assert history == []
        assert [entry.decision for entry in audit] == ["failed"] * len(SECRETS)
