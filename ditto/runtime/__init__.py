"""The runtime: worker registration, routing, ``invoke``, graph ``run``/``resume``/``stream``,
loops, checkpoints and ``close``."""

from ditto.runtime.context import ExecutionScope, NodeContext
from ditto.runtime.loops import LoopEvent, loop
from ditto.runtime.registry import WorkerHandle
from ditto.runtime.results import GraphRunError, InterruptInfo, RunResult
from ditto.runtime.router import WorkerInfo
from ditto.runtime.runtime import Ditto, create_ditto
from ditto.runtime.streams import RunEnd, TaskDone, TaskInterrupted
from ditto.runtime.worker import Dispose, Handler, NodeSpec, WorkerDefinition, define_worker

__all__ = (
    "Dispose",
    "Ditto",
    "ExecutionScope",
    "GraphRunError",
    "Handler",
    "InterruptInfo",
    "LoopEvent",
    "NodeContext",
    "NodeSpec",
    "RunEnd",
    "RunResult",
    "TaskDone",
    "TaskInterrupted",
    "WorkerDefinition",
    "WorkerHandle",
    "WorkerInfo",
    "create_ditto",
    "define_worker",
    "loop",
)
