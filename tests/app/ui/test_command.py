"""``ditto ui``'s refusals, before anything listens."""

from __future__ import annotations

from tests.app.cli.runner import invoke_cli
from tests.app.ui.seed import Seeded


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
