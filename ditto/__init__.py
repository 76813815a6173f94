"""Ditto: a DAG-based worker runtime for agent memory and context.

Declare graphs of ``DOMAIN.VERB`` node invocations, register workers that implement them, and get
every outcome back as a :class:`NodeResult`.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from ditto.contracts import AttemptInfo, NodeContract, NodeResult, NodeStatus, RetryPolicy
from ditto.errors import (
    ConfigError,
    DittoError,
    ErrorCode,
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
from ditto.graph import Graph, Task, graph
from ditto.runtime import (
    Ditto,
    ExecutionScope,
    GraphRunError,
    InterruptInfo,
    LoopEvent,
    NodeContext,
    NodeSpec,
    RunEnd,
    RunResult,
    TaskDone,
    TaskInterrupted,
    WorkerDefinition,
    WorkerHandle,
    WorkerInfo,
    create_ditto,
    define_worker,
    loop,
)

if TYPE_CHECKING:
    from ditto.app.config import Settings, load_config
    from ditto.app.memory import AsyncMemory, Memory


def __getattr__(name: str) -> object:
    # Imported when first used: Memory pulls in the MEMORY worker and its store, the
    # configuration pulls in pydantic and PyYAML.
    if name in ("Memory", "AsyncMemory"):
        from ditto.app import memory

        return getattr(memory, name)
    if name in ("Settings", "load_config"):
        from ditto.app import config

        return getattr(config, name)
    raise AttributeError(f"module 'ditto' has no attribute {name!r}")


try:
    __version__ = version("ditto-runtime")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = (
    "AsyncMemory",
    "AttemptInfo",
    "ConfigError",
    "Ditto",
    "DittoError",
    "ErrorCode",
    "ErrorInfo",
    "ExecutionScope",
    "Graph",
    "GraphError",
    "GraphRunError",
    "Interrupt",
    "InterruptInfo",
    "InvalidInputError",
    "LoopEvent",
    "Memory",
    "NoWorkerAvailableError",
    "NodeContext",
    "NodeContract",
    "NodeFailedError",
    "NodeResult",
    "NodeSpec",
    "NodeStatus",
    "RetryPolicy",
    "RunEnd",
    "RunResult",
    "RuntimeClosedError",
    "Settings",
    "Task",
    "TaskDone",
    "TaskInterrupted",
    "UnknownNodeError",
    "UnknownWorkerError",
    "WorkerCleanupError",
    "WorkerDefinition",
    "WorkerDefinitionError",
    "WorkerHandle",
    "WorkerInfo",
    "__version__",
    "create_ditto",
    "define_worker",
    "graph",
    "load_config",
    "loop",
)
