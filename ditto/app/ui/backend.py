"""What the pages call: the runtime (MEMORY nodes), the store's administrative capabilities
(history, audit log, retention), the checkpoint store and the graphs the page may resume.

One :class:`Backend` per ``ditto ui`` process, opened by the app's lifespan over the store
``ditto.yaml`` configures. The audit trail is turned on for the page's runtime whenever the store
keeps one: every change made through the page leaves an entry, whatever ``workers.memory.audit``
says for applications.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from ditto.app.config import Settings
    from ditto.graph import Graph
    from ditto.runtime.checkpoints.port import CheckpointStore
    from ditto.runtime.runtime import Ditto
    from ditto.runtime.worker import WorkerDefinition
    from workers.memory.ports import MemoryStore

__all__ = ("Backend", "UiOptions", "open_backend")

C = TypeVar("C")


@dataclass(frozen=True)
class UiOptions:
    """How one ``ditto ui`` process runs.

    Args:
        settings: The configuration (the store, access control, retention).
        token: The secret every request must carry (never logged).
        read_only: Hide and refuse every change.
        principal: Who the page acts as (``None``: no principal, allowed unless access control
            is enforced).
        checkpoints: A checkpoint store location for the Runs page (a SQLite file or a Redis
            URL), or ``None``.
        graphs: Graphs whose checkpointed runs the Runs page draws and resumes.
        workers: More workers for the page's runtime (the node types those graphs use).
    """

    settings: Settings
    token: str
    read_only: bool = False
    principal: str | None = None
    checkpoints: str | None = None
    graphs: Sequence[Graph] = ()
    workers: Sequence[WorkerDefinition] = field(default_factory=tuple)


class Backend:
    """The runtime and stores one page request works with."""

    def __init__(
        self,
        options: UiOptions,
        runtime: Ditto,
        store: MemoryStore,
        checkpoints: CheckpointStore | None,
    ) -> None:
        self.options = options
        self.settings = options.settings
        self.runtime = runtime
        self.store = store
        self.checkpoints = checkpoints

    async def call(self, node: str, payload: dict[str, Any], principal: str | None) -> Any:
        """Invoke a MEMORY node as ``principal``; its output.

        Raises:
            DittoError: The node's failure, with its code and message.
        """
        result = await self.runtime.invoke(node, payload, principal=principal)
        if not result.ok:
            assert result.error is not None
            raise DittoError(result.error.message, code=result.error.code)
        return result.output

    def capability(self, kind: type[C], what: str) -> C:
        """The store as ``kind`` (``HistoryLog``, ``AuditLog``...).

        Raises:
            DittoError: ``UNSUPPORTED`` naming what this store does not keep.
        """
        if not isinstance(self.store, kind):
            raise DittoError(
                f"the {self.settings.workers.memory.backend} store keeps no {what}",
                code=ErrorCode.UNSUPPORTED,
            )
        return self.store


def audited(settings: Settings, store: MemoryStore) -> Settings:
    """``settings`` with the audit trail on when ``store`` keeps an audit log."""
    from workers.memory.ports import AuditLog

    if settings.workers.memory.audit or not isinstance(store, AuditLog):
        return settings
    memory = settings.workers.memory.model_copy(update={"audit": True})
    workers = settings.workers.model_copy(update={"memory": memory})
    return settings.model_copy(update={"workers": workers})


CHECKPOINT_PREFIX = "ditto:"
"""The Redis key prefix of a checkpoint store (as ``ditto checkpoints`` defaults to)."""


def open_checkpoints(location: str, prefix: str = CHECKPOINT_PREFIX) -> CheckpointStore:
    """The checkpoint store at ``location``: a ``redis://`` URL or a SQLite file that exists.

    Raises:
        DittoError: ``CHECKPOINT_STORE_UNAVAILABLE``: no such SQLite file.
    """
    if location.startswith(("redis://", "rediss://", "unix://")):
        from ditto.adapters.redis import RedisCheckpointStore

        return RedisCheckpointStore.from_url(location, prefix=prefix)
    from pathlib import Path

    from ditto.adapters.sqlite import SqliteCheckpointStore

    path = Path(location)
    if not path.is_file():
        raise DittoError(
            f"no checkpoint store at {location}", code=ErrorCode.CHECKPOINT_STORE_UNAVAILABLE
        )
    return SqliteCheckpointStore(path)


@asynccontextmanager
async def open_backend(options: UiOptions) -> AsyncIterator[Backend]:
    """Open the configured memory store (it must exist), the checkpoint store when one is
    named, and a runtime over them; closed in reverse order on exit."""
    from ditto.app.bootstrap import build_memory_store, open_runtime

    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(build_memory_store(options.settings, existing=True))
        checkpoints = None
        if options.checkpoints is not None:
            checkpoints = open_checkpoints(options.checkpoints)
            stack.push_async_callback(checkpoints.aclose)
        runtime = await stack.enter_async_context(
            open_runtime(
                audited(options.settings, store),
                workers=options.workers,
                store=store,
                checkpoints=checkpoints,
                context=False,
            )
        )
        yield Backend(options, runtime, store, checkpoints)
