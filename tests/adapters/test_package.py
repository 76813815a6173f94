"""The adapters' import surface: each backend loads on first use, not with its package, and the
runtime's port packages load no adapter at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_the_port_packages_load_no_adapter_and_no_driver() -> None:
    _run(
        """
        import sys
        import ditto.runtime.checkpoints, ditto.runtime.transports
        loaded = [m for m in sys.modules if m.startswith("ditto.adapters")
                  or m in ("redis", "sqlite3")]
        assert loaded == [], loaded
        print("ok")
        """
    )


def test_each_adapter_loads_on_first_use() -> None:
    _run(
        """
        import sys
        import ditto.adapters.redis as redis_adapters
        import ditto.adapters.sqlite as sqlite_adapters
        backends = ("ditto.adapters.sqlite.checkpoints", "ditto.adapters.redis.checkpoints",
                    "ditto.adapters.redis.streams", "ditto.adapters.redis.server")
        assert [m for m in backends if m in sys.modules] == []
        assert "redis" not in sys.modules
        store = sqlite_adapters.SqliteCheckpointStore
        assert store.__module__ == "ditto.adapters.sqlite.checkpoints"
        assert "ditto.adapters.redis.checkpoints" not in sys.modules
        assert redis_adapters.RedisCheckpointStore.__module__ == "ditto.adapters.redis.checkpoints"
        assert redis_adapters.RedisStreamsTransport.__module__ == "ditto.adapters.redis.streams"
        assert redis_adapters.RemoteWorkerServer.__module__ == "ditto.adapters.redis.server"
        print("ok")
        """
    )
