"""Transports to workers in other processes: the :class:`Transport` port, signed envelopes, and
Redis Streams (:class:`RedisStreamsTransport` for callers, :class:`RemoteWorkerServer` for
workers). The Redis modules load on first use, so importing this package imports no driver."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from ditto.runtime.transports.port import Transport

if TYPE_CHECKING:
    from ditto.runtime.transports.redis_streams import RedisStreamsTransport
    from ditto.runtime.transports.redis_worker import RemoteWorkerServer

__all__ = (
    "CallEnvelope",
    "RedisStreamsTransport",
    "RemoteWorkerServer",
    "ReplyEnvelope",
    "Signer",
    "Transport",
)

_LAZY = {
    "RedisStreamsTransport": "ditto.runtime.transports.redis_streams",
    "RemoteWorkerServer": "ditto.runtime.transports.redis_worker",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
