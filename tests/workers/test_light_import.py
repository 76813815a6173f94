"""The workers' package faces stay light: importing a package, or the memory ports a new store
implements, loads no driver and no numpy; each name loads with its module on first use."""

from __future__ import annotations

import pytest

from tests.runtime.test_light_import import loaded_after


@pytest.mark.parametrize(
    "statement",
    [
        "import workers.memory",
        "import workers.memory.ports",
        "import workers.context",
        "import workers.retrieval",
    ],
)
def test_importing_a_package_face_loads_no_driver_and_no_numpy(statement: str) -> None:
    assert loaded_after(statement) == []


def test_a_name_loads_its_module_on_first_use() -> None:
    assert "sqlite3" in loaded_after("from workers.memory import SqliteMemoryStore")
    assert "redis" in loaded_after("from workers.context import RedisContextStore")
