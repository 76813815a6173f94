"""The package's import surface: backends load on first use, not with the package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_importing_the_package_loads_no_driver_backed_backend() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ditto.runtime.checkpoints as checkpoints
        loaded = [m for m in ("ditto.runtime.checkpoints.sqlite",
                              "ditto.runtime.checkpoints.redis") if m in sys.modules]
        assert loaded == [], loaded
        assert checkpoints.SqliteCheckpointStore.__module__ == "ditto.runtime.checkpoints.sqlite"
        assert "ditto.runtime.checkpoints.sqlite" in sys.modules
        assert "ditto.runtime.checkpoints.redis" not in sys.modules
        assert checkpoints.RedisCheckpointStore.__module__ == "ditto.runtime.checkpoints.redis"
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
