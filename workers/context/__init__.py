"""The CONTEXT worker: the working set of the current task, explicit or cached under a scope.

``CONTEXT.LOAD``, ``SELECT``, ``UPDATE`` and ``COMPRESS``; scoped working sets live in a
:class:`ContextStateStore` (``RedisContextStore``, or ``InProcessContextStore`` by explicit
choice) with a TTL, a version and compare-and-set.
"""

from workers.context.canonical import scope_key, stable_id
from workers.context.contracts import (
    CompressInput,
    Context,
    ContextIngress,
    ContextItem,
    ContextScope,
    ContextSelection,
    LoadInput,
    Message,
    Reference,
    SelectInput,
    SelectStrategy,
    UpdateInput,
)
from workers.context.errors import ContextError, ContextErrorCode
from workers.context.policy import ContextPolicy
from workers.context.queue import ScopeQueue
from workers.context.services import ContextServices
from workers.context.stores.base import ContextStateStore, StoredContext
from workers.context.stores.inprocess import InProcessContextStore
from workers.context.stores.redis import RedisContextStore
from workers.context.worker import create_context_worker

__all__ = (
    "CompressInput",
    "Context",
    "ContextError",
    "ContextErrorCode",
    "ContextIngress",
    "ContextItem",
    "ContextPolicy",
    "ContextScope",
    "ContextSelection",
    "ContextServices",
    "ContextStateStore",
    "InProcessContextStore",
    "LoadInput",
    "Message",
    "RedisContextStore",
    "Reference",
    "ScopeQueue",
    "SelectInput",
    "SelectStrategy",
    "StoredContext",
    "UpdateInput",
    "create_context_worker",
    "scope_key",
    "stable_id",
)
