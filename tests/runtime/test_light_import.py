"""``import ditto`` stays light: no configuration stack, no drivers, no graph analysis until used
(the runtime core must be importable with none of them loaded)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "yaml", "networkx", "redis", "asyncpg", "sqlite3", "numpy")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return [name for name in done.stdout.strip().split(",") if name]


def test_import_ditto_loads_no_configuration_driver_or_graph_analysis() -> None:
    assert loaded_after("import ditto") == []


def test_a_runtime_without_settings_runs_a_graph_without_loading_them() -> None:
    code = (
        "import anyio\n"
        "from ditto import create_ditto, define_worker, graph\n"
        "async def echo(value, ctx):\n"
        "    return value\n"
        "async def main():\n"
        "    async with create_ditto(workers=[define_worker('e', {'E.CHO': echo})]) as runtime:\n"
        "        run = await runtime.run(graph('g').node('a', 'E.CHO', [], lambda i, d: i), 1)\n"
        "        assert run.ok\n"
        "anyio.run(main)"
    )
    assert loaded_after(code) == []


def test_settings_load_the_configuration_stack_when_asked() -> None:
    assert "pydantic" in loaded_after("import ditto\nditto.Settings()")
