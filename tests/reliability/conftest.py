"""The reliability campaign: hostile inputs, killed writers, a Redis outage, a hostile CLI.

Hypothesis runs under one of two profiles, chosen with ``DITTO_HYPOTHESIS_PROFILE``:

* ``ci`` (the default): enough examples per node to catch regressions, the whole package in
  about a minute on two cores;
* ``slow``: 10,000 examples per test, for a campaign run by hand or nightly.

The profiles apply to this package's tests only (:data:`FUZZ`), never to the rest of the suite.
The memory fixtures (``memory``, ``open_store``, ``store_env``) are the memory suite's own.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.workers.memory.conftest import memory, open_store, store_env

__all__ = ("FUZZ", "FUZZ_TIMEOUT", "memory", "open_store", "store_env")

settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one store per test, shared by its examples
        HealthCheck.too_slow,
        HealthCheck.data_too_large,  # deep and long values are the point
        HealthCheck.large_base_example,
    ],
)
settings.register_profile("slow", settings.get_profile("ci"), max_examples=10_000)

FUZZ = settings(settings.get_profile(os.environ.get("DITTO_HYPOTHESIS_PROFILE", "ci")))
"""The settings of every fuzz test here: the selected profile."""


FUZZ_TIMEOUT = pytest.mark.timeout(0 if FUZZ.max_examples > 1_000 else None)
"""The suite's timeout per test (``None``), lifted (``0``) for a long campaign (``slow``)."""
