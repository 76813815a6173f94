"""The runtime: worker registration, routing, ``invoke``, graph ``run`` and ``close``."""

from ditto.runtime.context import ExecutionScope, NodeContext
from ditto.runtime.results import GraphRunError, RunResult
from ditto.runtime.router import WorkerInfo
from ditto.runtime.runtime import Ditto, WorkerHandle, create_ditto
from ditto.runtime.worker import Dispose, Handler, NodeSpec, WorkerDefinition, define_worker

__all__ = (
    "Dispose",
    "Ditto",
    "ExecutionScope",
    "GraphRunError",
    "Handler",
    "NodeContext",
    "NodeSpec",
    "RunResult",
    "WorkerDefinition",
    "WorkerHandle",
    "WorkerInfo",
    "create_ditto",
    "define_worker",
)
