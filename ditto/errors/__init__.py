"""Error codes, the error payload carried by results, and the exception tree.

Two channels, kept apart on purpose:

* A node's business failure travels as data: a ``NodeResult`` with ``status="failed"`` and an
  :class:`ErrorInfo`. Handlers raise :class:`DittoError` (or a subclass) and the runtime turns it
  into that payload; every other exception becomes ``INTERNAL_ERROR`` with a generic message.
* Misuse of the runtime itself (a closed runtime, a node type no worker implements, an invalid
  graph, a bad configuration) raises a :class:`DittoError` subclass at the call site.

Codes are one :class:`~enum.StrEnum` for the library and its workers: stable API, documented in
the README table. Each adapter turns driver failures into these errors with its own table passed
to :class:`map_exceptions` (or :func:`translate`); this module imports no driver.
"""

from ditto.errors.codes import ErrorCode
from ditto.errors.core import (
    ConfigError,
    DittoError,
    ErrorInfo,
    GraphError,
    Interrupt,
    InvalidInputError,
    NodeFailedError,
    NoWorkerAvailableError,
    RuntimeClosedError,
    UnknownNodeError,
    UnknownWorkerError,
    WorkerCleanupError,
    WorkerDefinitionError,
)
from ditto.errors.mapping import ExceptionMapping, map_exceptions, translate

__all__ = (
    "ConfigError",
    "DittoError",
    "ErrorCode",
    "ErrorInfo",
    "ExceptionMapping",
    "GraphError",
    "Interrupt",
    "InvalidInputError",
    "NoWorkerAvailableError",
    "NodeFailedError",
    "RuntimeClosedError",
    "UnknownNodeError",
    "UnknownWorkerError",
    "WorkerCleanupError",
    "WorkerDefinitionError",
    "map_exceptions",
    "translate",
)
