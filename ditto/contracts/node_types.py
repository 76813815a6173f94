"""Node types and their contracts: which input and output type each node type has.

A :class:`NodeContract` is declared by the worker that implements the node type; the runtime
builds one :class:`NodeTypeRegistry` per instance from its registered workers (never a global
registry filled at import time) and uses it to validate and convert every input once, at the
boundary, before any worker code runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ditto.errors import ErrorCode, InvalidInputError, WorkerDefinitionError

__all__ = ("NODE_TYPE_PATTERN", "NodeContract", "NodeTypeRegistry", "is_node_type")

NODE_TYPE_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Z][A-Z0-9_]*)+$")
"""``DOMAIN.VERB`` (at least two UPPER_SNAKE segments), e.g. ``MEMORY.WRITE``."""


def is_node_type(value: object) -> bool:
    """True when ``value`` is a string naming a valid node type."""
    return isinstance(value, str) and NODE_TYPE_PATTERN.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class NodeContract:
    """The input and output types of one node type.

    ``Any`` means "not checked": the value is passed through unchanged. Any other type is
    enforced with ``msgspec.convert`` (dicts and JSON-like values are converted to Structs).
    """

    node_type: str
    input_type: Any = Any
    output_type: Any = Any

    def __post_init__(self) -> None:
        if not is_node_type(self.node_type):
            raise WorkerDefinitionError(
                f"invalid node type {self.node_type!r}: expected DOMAIN.VERB in UPPER_SNAKE "
                "segments, e.g. MEMORY.WRITE"
            )

    def convert_input(self, value: object) -> Any:
        """Validate ``value`` against the input type and return the converted input.

        Raises:
            InvalidInputError: The value does not match; ``details["path"]`` names the field.
        """
        return _convert(value, self.input_type, ErrorCode.INVALID_INPUT, self.node_type)

    def convert_output(self, value: object, *, trusted: bool = False) -> Any:
        """Validate a handler's return value against the output type.

        A Struct of the output type is checked field by field like a dict (its constructor
        checks no types), unless ``trusted``: a worker that builds its outputs from values it
        has validated (the built-in workers) skips the copy that checking costs.

        Raises:
            InvalidInputError: With code ``INVALID_OUTPUT`` when the value does not match.
        """
        if trusted and type(value) is self.output_type:
            return value
        return _convert(value, self.output_type, ErrorCode.INVALID_OUTPUT, self.node_type)


def _convert(value: object, target: Any, code: ErrorCode, node_type: str) -> Any:
    if target is Any:
        return value
    try:
        if isinstance(value, msgspec.Struct):
            # A Struct built in Python is not type-checked by its constructor; going through
            # builtins re-validates every field (and nested constraints) exactly like a dict.
            value = msgspec.to_builtins(value)
        return msgspec.convert(value, target)
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError) as exc:
        # ValueError: msgspec raises UnicodeEncodeError for a lone surrogate in a field it
        # converts (a str field, an enum value, a key); RecursionError: nesting too deep.
        what = "input" if code == ErrorCode.INVALID_INPUT else "output"
        raise InvalidInputError(
            f"invalid {what} for {node_type}: {_safe_reason(exc)}",
            code=code,
            details={"node": node_type},
        ) from exc


def _safe_reason(exc: BaseException) -> str:
    # msgspec messages name the expected type and the JSON path ("Expected `int`, got `str` -
    # at `$.limit`"); at most they echo a rejected enum value from the caller's own input. They
    # are capped so a huge input cannot blow up a result, and kept encodable (no surrogates).
    if isinstance(exc, UnicodeError):
        return "it holds text that is not valid Unicode (a lone surrogate)"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    text = (str(exc) or type(exc).__name__).encode("utf-8", "backslashreplace").decode()
    return text if len(text) <= 300 else text[:297] + "..."


class NodeTypeRegistry(Mapping[str, NodeContract]):
    """Node type -> contract, for one runtime. Registering the same node type twice requires the
    same contract, so replicas and different worker kinds can never disagree on a wire type."""

    __slots__ = ("_contracts",)

    def __init__(self) -> None:
        self._contracts: dict[str, NodeContract] = {}

    def check(self, contract: NodeContract) -> None:
        """Raises:
        WorkerDefinitionError: The node type is registered with a different contract."""
        existing = self._contracts.get(contract.node_type)
        if existing is not None and existing != contract:
            raise WorkerDefinitionError(
                f"{contract.node_type} is already registered with another contract "
                f"(input {existing.input_type!r}, output {existing.output_type!r})"
            )

    def add(self, contract: NodeContract) -> None:
        """Register ``contract`` (checked as by :meth:`check`)."""
        self.check(contract)
        self._contracts.setdefault(contract.node_type, contract)

    def __getitem__(self, node_type: str) -> NodeContract:
        return self._contracts[node_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._contracts)

    def __len__(self) -> int:
        return len(self._contracts)
