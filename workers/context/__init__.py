"""The CONTEXT worker: the working set of the current task, explicit or cached under a scope.

``CONTEXT.LOAD``, ``SELECT``, ``UPDATE`` and ``COMPRESS``; scoped working sets live in a
:class:`ContextStateStore` (``RedisContextStore``, or ``InProcessContextStore`` by explicit
choice) with a TTL, a version and compare-and-set.

Each name is imported on first use, so importing the package loads no Redis client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes

if TYPE_CHECKING:
    from workers.context.canonical import (
        scope_key,
        stable_id,
    )
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
    from workers.context.errors import (
        ContextError,
    )
    from workers.context.policy import (
        ContextPolicy,
    )
    from workers.context.queue import (
        ScopeQueue,
    )
    from workers.context.services import (
        ContextServices,
    )
    from workers.context.stores.base import (
        ContextStateStore,
        StoredContext,
    )
    from workers.context.stores.inprocess import (
        InProcessContextStore,
    )
    from workers.context.stores.redis import (
        RedisContextStore,
    )
    from workers.context.worker import (
        create_context_worker,
    )

__all__ = (
    "CompressInput",
    "Context",
    "ContextError",
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

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "CompressInput": "workers.context.contracts",
        "Context": "workers.context.contracts",
        "ContextError": "workers.context.errors",
        "ContextIngress": "workers.context.contracts",
        "ContextItem": "workers.context.contracts",
        "ContextPolicy": "workers.context.policy",
        "ContextScope": "workers.context.contracts",
        "ContextSelection": "workers.context.contracts",
        "ContextServices": "workers.context.services",
        "ContextStateStore": "workers.context.stores.base",
        "InProcessContextStore": "workers.context.stores.inprocess",
        "LoadInput": "workers.context.contracts",
        "Message": "workers.context.contracts",
        "RedisContextStore": "workers.context.stores.redis",
        "Reference": "workers.context.contracts",
        "ScopeQueue": "workers.context.queue",
        "SelectInput": "workers.context.contracts",
        "SelectStrategy": "workers.context.contracts",
        "StoredContext": "workers.context.stores.base",
        "UpdateInput": "workers.context.contracts",
        "create_context_worker": "workers.context.worker",
        "scope_key": "workers.context.canonical",
        "stable_id": "workers.context.canonical",
    },
)
