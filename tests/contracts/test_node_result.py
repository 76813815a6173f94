"""``NodeResult`` / ``ErrorInfo``: frozen wire types with ``ok`` and ``unwrap()``."""

from __future__ import annotations

import msgspec
import pytest

from ditto import ErrorCode, ErrorInfo, NodeFailedError, NodeResult
from ditto.contracts import NodeContract, is_node_type
from ditto.errors import InvalidInputError


def test_success_unwraps_to_its_output() -> None:
    result = NodeResult("id-1", "MEMORY.GET", "success", output={"items": []})
    assert result.ok
    assert result.unwrap() == {"items": []}


@pytest.mark.parametrize("status", ["failed", "timeout", "cancelled"])
def test_non_success_unwrap_raises_with_the_error(status: str) -> None:
    error = ErrorInfo("CONFLICT", "key taken", retryable=False, details={"key": "k"})
    result: NodeResult[None] = NodeResult("id-2", "MEMORY.WRITE", status, error=error)  # type: ignore[arg-type]
    assert not result.ok
    with pytest.raises(NodeFailedError) as raised:
        result.unwrap()
    assert raised.value.error is error
    assert raised.value.code == "CONFLICT"
    assert raised.value.status == status
    assert raised.value.details == {"key": "k"}


def test_results_are_frozen_and_round_trip_through_json() -> None:
    result = NodeResult(
        "id-3", "CONTEXT.LOAD", "failed", error=ErrorInfo("STATE_CONFLICT", "stale", True)
    )
    with pytest.raises(AttributeError):
        result.status = "success"  # type: ignore[misc]
    encoded = msgspec.json.encode(result)
    assert msgspec.json.decode(encoded, type=NodeResult[None]) == result
    assert msgspec.json.decode(encoded)["error"]["code"] == "STATE_CONFLICT"


def test_error_codes_are_stable_strings() -> None:
    assert ErrorCode.INVALID_INPUT == "INVALID_INPUT"
    assert all(code.value == code.name for code in ErrorCode)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("MEMORY.WRITE", True),
        ("INFER.REASONING.TRAJECTORY", True),
        ("A1.B_2", True),
        ("MEMORY", False),
        ("memory.write", False),
        ("MEMORY..WRITE", False),
        ("1MEMORY.WRITE", False),
        ("MEMORY.WRITE ", False),
        (None, False),
    ],
)
def test_node_type_pattern(value: object, valid: bool) -> None:
    assert is_node_type(value) is valid


class Query(msgspec.Struct, frozen=True):
    limit: int


def test_contract_converts_once_and_rejects_with_a_path() -> None:
    contract = NodeContract("MEMORY.QUERY", Query, Query)
    assert contract.convert_input({"limit": 3}) == Query(3)
    with pytest.raises(InvalidInputError) as raised:
        contract.convert_input({"limit": "3"})
    assert raised.value.code == ErrorCode.INVALID_INPUT
    assert "$.limit" in raised.value.message
    with pytest.raises(InvalidInputError) as raised_output:
        contract.convert_output({"limit": None})
    assert raised_output.value.code == ErrorCode.INVALID_OUTPUT
