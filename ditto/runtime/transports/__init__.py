"""Transports to workers in other processes: the :class:`Transport` port and the signed
envelopes every engine carries. The Redis Streams engine is an adapter
(:mod:`ditto.adapters.redis`)."""

from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from ditto.runtime.transports.port import Transport

__all__ = ("CallEnvelope", "ReplyEnvelope", "Signer", "Transport")
