"""Redis adapters: :class:`RedisCheckpointStore`, and remote workers over Redis Streams —
:class:`RedisStreamsTransport` (a caller's :class:`~ditto.runtime.transports.port.Transport`)
and :class:`RemoteWorkerServer` (``ditto worker serve``). Each loads on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes

if TYPE_CHECKING:
    from ditto.adapters.redis.checkpoints import RedisCheckpointStore
    from ditto.adapters.redis.server import RemoteWorkerServer
    from ditto.adapters.redis.streams import RedisStreamsTransport

__all__ = ("RedisCheckpointStore", "RedisStreamsTransport", "RemoteWorkerServer")

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "RedisCheckpointStore": "ditto.adapters.redis.checkpoints",
        "RedisStreamsTransport": "ditto.adapters.redis.streams",
        "RemoteWorkerServer": "ditto.adapters.redis.server",
    },
)
