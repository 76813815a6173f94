"""Every error code of the library and its workers, in one list: stable API, documented in the
README's error-code table (``tests/test_docs.py`` checks the two agree)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ("ErrorCode",)


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
    CHECKPOINT_BUSY = "CHECKPOINT_BUSY"
    """Another run holds the checkpoint's lease (retryable once it ends or its lease expires;
    the details name the holder and when the lease expires)."""
    CHECKPOINT_LEASE_LOST = "CHECKPOINT_LEASE_LOST"
    """This run's lease on the checkpoint expired or was taken over: it may write nothing more
    (a fencing token the store checks), so a stale process never overwrites a newer one."""
    # ----------------------------------------------------------------- remote workers
    TRANSPORT_UNAVAILABLE = "TRANSPORT_UNAVAILABLE"
    """The transport to remote workers (Redis) cannot be reached or failed (retryable)."""
    QUEUE_FULL = "QUEUE_FULL"
    """Too many calls are waiting (a remote node type's cap, a CONTEXT scope's queue); retryable."""
    MESSAGE_REJECTED = "MESSAGE_REJECTED"
    """A remote message was too large, unsigned, forged or malformed; it was not executed."""
    REMOTE_KEY_MISMATCH = "REMOTE_KEY_MISMATCH"
    """Workers of the node type are alive, but none holds this caller's ``DITTO_REMOTE_SECRET``
    (their key fingerprints differ): the call was not sent."""
    DEAD_LETTERED = "DEAD_LETTERED"
    """A remote call was delivered more than ``max_deliveries`` times (its workers kept dying
    on it): it went to the dead-letter stream instead of running again."""
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
    UNSAFE_CONTENT = "UNSAFE_CONTENT"
    """The write policy's safety stage refused the write: it holds content of a kind whose
    action is ``reject`` (a secret, a card, an injection...); the message and details name the
    kinds and counts, never the value."""
    FORBIDDEN = "FORBIDDEN"
    """Access control refused the call: another principal's private record, or no principal
    where ``acl.mode: enforce`` needs one."""
    # ----------------------------------------------------------------- RETRIEVAL worker
    RETRIEVAL_TARGET_NOT_FOUND = "RETRIEVAL_TARGET_NOT_FOUND"
    """RETRIEVAL.SEARCH named a target the worker was not configured with (or of another type)."""
    RETRIEVAL_STRATEGY_UNSUPPORTED = "RETRIEVAL_STRATEGY_UNSUPPORTED"
    """The target's provider does not offer the strategy (``rag`` is never one)."""
    RETRIEVAL_PROVIDER_UNAVAILABLE = "RETRIEVAL_PROVIDER_UNAVAILABLE"
    """A retrieval provider cannot run: its extra is not installed, its collection or folder is
    missing, or its engine cannot be reached."""
    RETRIEVAL_BACKEND_ERROR = "RETRIEVAL_BACKEND_ERROR"
    """A retrieval provider failed unexpectedly; details are in the log only."""
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
