"""Hostile tool calls for the fuzz tests of the toolkit and the MCP server, and their settings.

The profile comes from ``DITTO_HYPOTHESIS_PROFILE`` as in ``tests/reliability``: ``ci`` (the
default, a few hundred examples per test) or ``slow`` (10,000 per test, by hand or nightly).
The settings are built here rather than registered, so they never replace the reliability
suite's profiles of the same names.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ditto.app.tools import TOOLS

__all__ = (
    "FUZZ",
    "FUZZ_TIMEOUT",
    "hostile_arguments",
    "hostile_json",
    "hostile_names",
    "json_values",
)

_SLOW = os.environ.get("DITTO_HYPOTHESIS_PROFILE", "ci") == "slow"

FUZZ = settings(
    max_examples=10_000 if _SLOW else 200,
    deadline=None,
    database=None,  # nothing written into the working tree
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one runtime or server per test, for all examples
        HealthCheck.too_slow,
        HealthCheck.data_too_large,  # deep and long values are the point
        HealthCheck.large_base_example,
    ],
)
"""The settings of every fuzz test of the memory tools."""

FUZZ_TIMEOUT = pytest.mark.timeout(0 if _SLOW else None)
"""The suite's timeout per test, lifted for the ``slow`` campaign."""

_characters = st.characters() | st.characters(categories=["Cs"])  # lone surrogates too
_texts = st.text(_characters, max_size=40) | st.sampled_from(["", "\ud800", "a\udfffb", "\x00"])

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12,
)
"""JSON values whose strings may hold lone surrogates and NULs."""


def _nested(depth: int, opening: str) -> str:
    closing = {"[": "]", '{"k":': "}"}[opening]
    return opening * depth + "0" * (opening != "[") + closing * depth


_long = st.builds(str.__mul__, st.sampled_from(["a", "é", "\U0001f600"]), st.integers(1, 70_000))
"""Text up to 280,000 UTF-8 bytes: around the 64 KiB cap on stored values."""

_deep = st.builds(
    _nested, st.integers(min_value=1, max_value=120_000), st.sampled_from(["[", '{"k":'])
)

_FIELDS = ("key", "value", "query", "content", "summary", "categories", "limit")

hostile_arguments: st.SearchStrategy[Any] = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional=dict.fromkeys(_FIELDS, json_values | _long),
    ),
)
"""Arguments as a model might garble them: any JSON value, or an object of the tools' fields
holding any values (some past the size cap)."""

hostile_names: st.SearchStrategy[Any] = st.sampled_from(sorted(TOOLS)) | json_values
"""A real tool's name, or anything else."""


def _as_json(value: Any) -> str:
    # ensure_ascii: a lone surrogate travels as its \\ud800 escape, as a client would send it.
    return json.dumps(value, ensure_ascii=True)


hostile_json: st.SearchStrategy[str] = st.one_of(
    hostile_arguments.map(_as_json),
    _deep,
    _deep.map(lambda text: text[: len(text) // 2]),  # cut: never closed
    st.text(_characters.filter(lambda char: char not in "\r\n"), max_size=60),
)
"""The JSON text of hostile arguments, text nested up to 120,000 deep (closed or not), and
text that is not JSON at all; never a line break (stdio frames a message per line)."""
