"""``ditto ui``'s refusals, before anything listens."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.app.cli.runner import invoke_cli
from tests.app.ui.seed import OPERATOR, Seeded


def test_a_non_loopback_bind_needs_an_explicit_token(seeded: Seeded) -> None:
    refused = invoke_cli("ui", "--config", str(seeded.config), "--host", "0.0.0.0")
    assert refused.exit_code == 2
    assert "not a loopback address" in refused.stderr
    assert "DITTO_UI_TOKEN" in refused.stderr


def test_a_weak_token_is_refused(seeded: Seeded) -> None:
    refused = invoke_cli("ui", "--config", str(seeded.config), env={"DITTO_UI_TOKEN": "short"})
    assert refused.exit_code == 2
    assert "16 to 256" in refused.stderr
    assert "short" not in refused.stderr  # the token is never echoed


def test_enforced_access_control_needs_a_principal(seeded: Seeded) -> None:
    refused = invoke_cli("ui", "--config", str(seeded.config))
    assert refused.exit_code == 2
    assert "--principal" in refused.stderr


def test_a_generated_token_is_printed_once_and_opens_the_page(
    seeded: Seeded, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DITTO_UI_TOKEN", "DITTO_CONFIG")
    }
    log = tmp_path / "ui.log"
    command = [sys.executable, "-m", "ditto", "ui", "--config", str(seeded.config)]
    command += ["--port", str(port), "--principal", OPERATOR, "--read-only"]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env=environment, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        answer = None
        while answer is None and time.monotonic() < deadline and process.poll() is None:
            found = re.search(
                r"open (http://127\.0\.0\.1:\d+/)\?token=([A-Za-z0-9_-]+)", log.read_text()
            )
            if found is not None:
                try:
                    with urllib.request.urlopen(
                        urllib.request.Request(
                            found.group(1), headers={"Authorization": f"Bearer {found.group(2)}"}
                        ),
                        timeout=2,
                    ) as opened:
                        answer = (opened.status, opened.read().decode())
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
            time.sleep(0.1)  # polling a starting server, not timing anything
        assert answer is not None, log.read_text()
        assert answer[0] == 200
        assert "Read-only" in answer[1]
    finally:
        process.terminate()
        process.wait(timeout=15)
    printed = log.read_text()
    assert found is not None
    assert printed.count(found.group(2)) == 1  # shown once, never logged again
