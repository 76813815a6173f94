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

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeAlias

import msgspec

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


class ErrorCode(StrEnum):
    """Every stable error code the library and its workers raise, each once: the README's "Error
    codes" table lists exactly these. An :class:`ErrorInfo` carries any UPPER_SNAKE string, so a
    third-party worker may still use codes of its own."""

    # ----------------------------------------------------------------- runtime
    INVALID_INPUT = "INVALID_INPUT"
    """The input breaks its contract: a node input (the handler was not called), a CONTEXT input
    (shape, scope, budgets), or a checkpoint id, scope, record or limit (nothing was touched)."""
    INVALID_OUTPUT = "INVALID_OUTPUT"
    """A handler returned a value that does not match the node type's output contract."""
    INVALID_GRAPH = "INVALID_GRAPH"
    """A graph was built or run with an empty/duplicate task id, an unknown dependency or a bad
    node type."""
    GRAPH_RUN_FAILED = "GRAPH_RUN_FAILED"
    """A binder raised while a graph ran; the partial result is attached to the exception."""
    UNKNOWN_NODE = "UNKNOWN_NODE"
    """No registered worker implements the node type."""
    UNKNOWN_WORKER = "UNKNOWN_WORKER"
    """A pinned worker id is not registered, or does not implement the node type."""
    NO_WORKER_AVAILABLE = "NO_WORKER_AVAILABLE"
    """Every replica that could run the node is paused or at its concurrency limit (retryable)."""
    INVALID_WORKER = "INVALID_WORKER"
    """A worker definition or registration is malformed (bad type, duplicate id, no handlers)."""
    TIMEOUT = "TIMEOUT"
    """The node's deadline passed before it finished."""
    CANCELLED = "CANCELLED"
    """The node was cancelled from inside (not by its caller, whose cancellation propagates)."""
    INTERNAL_ERROR = "INTERNAL_ERROR"
    """A handler raised an unexpected exception; details are in the log, not in the result."""
    RUNTIME_CLOSED = "RUNTIME_CLOSED"
    """The runtime is closing or closed and accepts no new work."""
    OPENED_IN_PARENT = "OPENED_IN_PARENT"
    """A ``Memory`` was used in a forked child: opened in the parent, it must be opened anew."""
    WORKER_CLEANUP_FAILED = "WORKER_CLEANUP_FAILED"
    """One or more worker ``dispose`` callbacks failed during ``close()``."""
    INVALID_CONFIG = "INVALID_CONFIG"
    """``ditto.yaml`` or the environment holds an unknown key, a wrong type, an out-of-range value
    or a secret where none belongs."""
    INTERRUPTED = "INTERRUPTED"
    """A handler raised :class:`Interrupt` to wait for a person; in a graph run the run pauses,
    checkpoints and returns ``status="interrupted"``; ``resume`` continues it."""
    LOOP_LIMIT_REACHED = "LOOP_LIMIT_REACHED"
    """A loop ran ``max_iterations`` graphs without ``done``."""
    LOOP_TIMEOUT = "LOOP_TIMEOUT"
    """A loop's ``timeout`` passed before it finished."""
    # ----------------------------------------------------------------- checkpoints
    CHECKPOINT_NOT_FOUND = "CHECKPOINT_NOT_FOUND"
    """No checkpoint has this id (never saved, or deleted)."""
    CHECKPOINT_MISMATCH = "CHECKPOINT_MISMATCH"
    """The checkpoint belongs to another plan (tasks, dependencies or node types changed), another
    run input or another kind of run; resuming it would mix two runs."""
    CHECKPOINT_CORRUPT = "CHECKPOINT_CORRUPT"
    """A checkpoint's digest does not match its content (edited, truncated or tampered with), or
    the store holds data under its keys that it did not write or cannot read."""
    CHECKPOINT_STORE_UNAVAILABLE = "CHECKPOINT_STORE_UNAVAILABLE"
    """The checkpoint store is unreachable or failed (retryable), or is closed (not retryable)."""
    # ----------------------------------------------------------------- remote workers
    TRANSPORT_UNAVAILABLE = "TRANSPORT_UNAVAILABLE"
    """The transport to remote workers (Redis) cannot be reached or failed (retryable)."""
    QUEUE_FULL = "QUEUE_FULL"
    """Too many calls are waiting (a remote node type's cap, a CONTEXT scope's queue); retryable."""
    MESSAGE_REJECTED = "MESSAGE_REJECTED"
    """A remote message was too large, unsigned, forged or malformed; it was not executed."""
    # ----------------------------------------------------------------- stored records
    NOT_FOUND = "NOT_FOUND"
    """A record the operation needs does not exist."""
    CONFLICT = "CONFLICT"
    """The operation conflicts with the stored state (a different record under the same key, a
    stale version)."""
    # ----------------------------------------------------------------- MEMORY worker
    SEARCH_UNAVAILABLE = "SEARCH_UNAVAILABLE"
    """No search provider was given and the store has no search of its own."""
    INVALID_BACKEND_OUTPUT = "INVALID_BACKEND_OUTPUT"
    """A store or provider returned something that breaks the node's contract."""
    MEMORY_BACKEND_ERROR = "MEMORY_BACKEND_ERROR"
    """A store or provider failed unexpectedly; details are in the log only."""
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    """The store cannot be reached or opened, or the connection or disk failed mid-operation;
    retryable when the outage may pass (a lost connection, an I/O error), not when the store
    cannot be opened as configured (a missing folder, no permission, a full disk)."""
    STORE_CORRUPT = "STORE_CORRUPT"
    """The store's file or schema is not a memory store (not a database, truncated, damaged,
    or written by a newer version of Ditto); nothing was changed."""
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
    """The connection to the store failed while a change was committing: it may or may not be
    stored. Not retryable as is (a retry could apply it twice): read the records back first."""
    STORE_READ_ONLY = "STORE_READ_ONLY"
    """A change was asked of a store that can only be read (a read-only file or database);
    nothing was changed."""
    UNSUPPORTED = "UNSUPPORTED"
    """The store does not offer this operation (for example a store that keeps no history)."""
    STORE_TIMEOUT = "STORE_TIMEOUT"
    """The store did not answer in time: a statement timeout, or a database locked by another
    writer past the busy timeout (retryable)."""
    EMBEDDING_MISMATCH = "EMBEDDING_MISMATCH"
    """Vectors of another embedding model (or dimension) than the store holds: it never
    compares incomparable vectors; ``reindex`` moves a store to a new model."""
    EMBEDDING_FAILED = "EMBEDDING_FAILED"
    """The embedder failed or returned vectors of the wrong count, dimension or non-finite
    values; nothing was stored."""
    EMBEDDER_UNAVAILABLE = "EMBEDDER_UNAVAILABLE"
    """The configured embedder cannot run here (its model files or extra are not installed);
    the message names the command that installs them."""
    FORBIDDEN = "FORBIDDEN"
    """Access control refused the call: another principal's private record, or no principal
    where ``acl.mode: enforce`` needs one."""
    # ----------------------------------------------------------------- CONTEXT worker
    INLINE_LIMIT_EXCEEDED = "INLINE_LIMIT_EXCEEDED"
    """An item's inline content is over ``max_inline_bytes`` and carries no reference."""
    ITEM_LIMIT_EXCEEDED = "ITEM_LIMIT_EXCEEDED"
    """LOAD or UPDATE would leave more than ``max_items`` items (nothing compresses silently)."""
    DUPLICATE_ITEM = "DUPLICATE_ITEM"
    """An item id is already present and the duplicate policy is ``reject``."""
    MISSING_ITEM = "MISSING_ITEM"
    """An id to remove is absent and ``missing_removal`` is ``reject``."""
    STRATEGY_UNAVAILABLE = "STRATEGY_UNAVAILABLE"
    """SELECT asked for a strategy whose service is not configured."""
    INVALID_PROVIDER_OUTPUT = "INVALID_PROVIDER_OUTPUT"
    """A selector, compressor, estimator or resolver returned something off-contract."""
    BUDGET_UNSATISFIABLE = "BUDGET_UNSATISFIABLE"
    """Protected items alone exceed the COMPRESS budget."""
    RESOLVER_UNAVAILABLE = "RESOLVER_UNAVAILABLE"
    """LOAD asked to resolve references and no resolver is configured."""
    STATE_STORE_UNAVAILABLE = "STATE_STORE_UNAVAILABLE"
    """A scope was given but no store is configured, or the store cannot be reached."""
    CONTEXT_NOT_FOUND = "CONTEXT_NOT_FOUND"
    """The scope has no state (never loaded, or expired)."""
    STATE_CONFLICT = "STATE_CONFLICT"
    """The state changed since it was read, or ``expected_version`` is stale."""
    INVALID_STATE = "INVALID_STATE"
    """The store holds corrupt or invalid state."""


class ErrorInfo(msgspec.Struct, frozen=True):
    """The error payload of a failed, timed-out or cancelled ``NodeResult``."""

    code: str
    """Stable UPPER_SNAKE code, e.g. ``"INVALID_INPUT"``, ``"CONFLICT"``."""
    message: str
    """Safe to show: never a secret, never a raw driver message."""
    retryable: bool = False
    """True when the same call may succeed later without any change (capacity, a store outage)."""
    details: dict[str, Any] | None = None
    """Structured, safe extra facts (e.g. the path of the invalid input field)."""


class DittoError(Exception):
    """Root of every error the library raises.

    Args:
        message: Safe, human-readable description (shown to end users as is).
        code: Stable code; defaults to the class's ``default_code``.
        retryable: Whether the same call may succeed later unchanged.
        details: Safe structured facts about the failure.
    """

    default_code: str = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = str(code if code is not None else self.default_code)
        self.retryable = retryable
        self.details = details

    def to_info(self) -> ErrorInfo:
        """The :class:`ErrorInfo` a node result carries for this error."""
        return ErrorInfo(self.code, self.message, self.retryable, self.details)

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class InvalidInputError(DittoError):
    """Input (a node input, an argument) does not satisfy its contract."""

    default_code = ErrorCode.INVALID_INPUT


class Interrupt(DittoError):
    """Raised by a handler to pause its graph run until a person answers.

    The run admits no new task, lets started tasks finish, saves a checkpoint and returns a
    :class:`~ditto.runtime.results.RunResult` whose ``status`` is ``"interrupted"``, with this
    payload in ``interrupts``. ``runtime.resume(checkpoint_id, answer)`` runs the task again and
    its handler finds the answer in ``ctx.resume_value`` (``ctx.interrupt(payload)`` does both
    steps: it raises the first time and returns the answer on resume).

    Outside a graph run (a plain ``invoke``) the result is simply ``failed`` with code
    ``INTERRUPTED`` and the payload in ``error.details["payload"]``.

    Args:
        payload: What the person needs to decide (plain JSON: it is stored in the checkpoint).
        message: A short, safe description.
    """

    default_code = ErrorCode.INTERRUPTED

    def __init__(self, payload: Any = None, message: str = "waiting for an answer") -> None:
        super().__init__(message, details={"payload": payload})
        self.payload = payload


class GraphError(DittoError):
    """A graph is malformed; the message names the offending task."""

    default_code = ErrorCode.INVALID_GRAPH


class UnknownNodeError(DittoError):
    """No registered worker implements the node type."""

    default_code = ErrorCode.UNKNOWN_NODE

    def __init__(self, node_type: str) -> None:
        super().__init__(f"no registered worker implements {node_type}")
        self.node_type = node_type


class UnknownWorkerError(DittoError):
    """A pinned worker id is unknown or does not implement the node type."""

    default_code = ErrorCode.UNKNOWN_WORKER

    def __init__(self, worker_id: str, node_type: str) -> None:
        super().__init__(f"worker {worker_id!r} is not registered for {node_type}")
        self.worker_id = worker_id
        self.node_type = node_type


class NoWorkerAvailableError(DittoError):
    """Every replica for the node type is paused or full. Becomes a failed, retryable result."""

    default_code = ErrorCode.NO_WORKER_AVAILABLE

    def __init__(self, node_type: str, worker_id: str | None = None) -> None:
        target = f"worker {worker_id!r}" if worker_id else "no worker"
        detail = "is paused or at its concurrency limit" if worker_id else "has free capacity"
        super().__init__(f"{target} {detail} for {node_type}", retryable=True)
        self.node_type = node_type


class WorkerDefinitionError(DittoError):
    """A worker definition or registration is malformed."""

    default_code = ErrorCode.INVALID_WORKER


class RuntimeClosedError(DittoError):
    """The runtime is closing or closed."""

    default_code = ErrorCode.RUNTIME_CLOSED

    def __init__(self) -> None:
        super().__init__("the runtime is closed and accepts no new work")


class ConfigError(DittoError):
    """Configuration is invalid; the message names the key path."""

    default_code = ErrorCode.INVALID_CONFIG


class NodeFailedError(DittoError):
    """Raised by ``NodeResult.unwrap()`` for a result that is not a success.

    Attributes:
        node: The node type of the failed result.
        status: ``failed``, ``timeout`` or ``cancelled``.
        error: The result's :class:`ErrorInfo`.
    """

    def __init__(self, node: str, status: str, error: ErrorInfo) -> None:
        super().__init__(
            f"{node} {status}: {error.message}",
            code=error.code,
            retryable=error.retryable,
            details=error.details,
        )
        self.node = node
        self.status = status
        self.error = error


class WorkerCleanupError(ExceptionGroup[Exception]):
    """Every ``dispose`` failure from one ``close()``, together (code ``WORKER_CLEANUP_FAILED``)."""

    code = ErrorCode.WORKER_CLEANUP_FAILED


# ----------------------------------------------------------------- driver-error boundaries
ExceptionMapping: TypeAlias = Mapping[
    type[BaseException] | tuple[type[BaseException], ...], Callable[[Any], DittoError | None]
]
"""A boundary's table: driver exception class (or tuple) -> factory of the :class:`DittoError` to
raise. The factory gets the exception (to read an SQLite result code, a SQLSTATE) and may return
``None`` to let it through unchanged. The first matching key wins: put a subclass first."""


def translate(exc: BaseException, table: ExceptionMapping) -> DittoError | None:
    """The error ``table`` maps ``exc`` to, ``exc`` set as its ``__cause__``; ``None`` when no key
    matches or the factory lets it through. For a failure handed on rather than raised (to
    another task's future, say); a block uses :class:`map_exceptions`."""
    for kinds, factory in table.items():
        if isinstance(exc, kinds):
            error = factory(exc)
            if error is not None:
                error.__cause__ = exc
            return error
    return None


class map_exceptions:  # lower case: it reads as a function, ``with map_exceptions(TABLE):``
    """A driver-error boundary (httpcore's ``map_exceptions``): an exception raised in the block
    that ``table`` maps is raised as its :class:`DittoError` ``from`` the driver's exception (the
    log keeps the cause); anything else passes through untouched.

    ``with`` or ``async with``; stateless, so one instance may be kept and entered concurrently.
    Not ``@contextmanager``: every store call enters one, and a generator costs ~5x per use.

    Args:
        table: Exception classes to factories (see :data:`ExceptionMapping`). Messages the
            factories build are shown to end users: never a URL, a password or a driver's text.
    """

    __slots__ = ("table",)

    def __init__(self, table: ExceptionMapping) -> None:
        self.table = table

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if exc is not None:
            error = translate(exc, self.table)
            if error is not None:
                raise error from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        self.__exit__(kind, exc, trace)
