"""``create_memory_worker``: the seven MEMORY nodes over a ``MemoryStore`` and an optional
``MemorySearchProvider``.

The worker owns the contract: it validates what the runtime could not (duplicate keys in a batch,
empty patches, JSON that cannot round-trip), resolves limits and cursors, checks every store and
provider output, and maps failures to stable codes. Stores only store.

The handlers are ``reads`` (GET, QUERY, SEARCH), ``writes`` (WRITE, UPDATE, DELETE) and
``reviews`` (REVIEW), on the state of ``node_base``; this module checks the worker's arguments
and assembles it.
"""

from __future__ import annotations

import logging
import math
from typing import TypeVar

from ditto.errors import InvalidInputError
from ditto.runtime.worker import WorkerDefinition, define_worker
from workers.memory.maintenance.retention import PeriodicHygiene, RetentionPolicy
from workers.memory.model.records import Clock, utc_now
from workers.memory.policy.config import WritePolicy
from workers.memory.ports import MemorySearchProvider, MemoryStore, UsageTracking, VectorStore
from workers.memory.retrieval.embeddings.base import Embedder, model_of
from workers.memory.retrieval.hybrid import SearchEngine, SearchSettings
from workers.memory.worker.access import AccessControl, AccessPolicy
from workers.memory.worker.boundary import backend_boundary
from workers.memory.worker.reads import ReadNodes
from workers.memory.worker.reviews import ReviewNodes
from workers.memory.worker.writes import WriteNodes

__all__ = ("MAX_LIMIT", "create_memory_worker")

logger = logging.getLogger("ditto.workers.memory")

MAX_LIMIT = 10_000
T = TypeVar("T")


def _check_limit(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be an integer from 1 to {MAX_LIMIT}")
    return value


class _MemoryNodes(ReadNodes, WriteNodes, ReviewNodes):
    """The seven MEMORY node handlers over one store."""


def create_memory_worker(
    store: MemoryStore,
    search: MemorySearchProvider | None = None,
    *,
    query_limit: int = 100,
    search_limit: int = 10,
    track_usage: bool | None = None,
    concurrency: int | None = None,
    clock: Clock = utc_now,
    access: AccessPolicy | None = None,
    audit: bool = False,
    retention: RetentionPolicy | None = None,
    hygiene_interval_s: float | None = None,
    embedder: Embedder | None = None,
    search_settings: SearchSettings | None = None,
    policy: WritePolicy | None = None,
) -> WorkerDefinition:
    """The MEMORY worker: ``MEMORY.GET``, ``QUERY``, ``SEARCH``, ``WRITE``, ``UPDATE``, ``DELETE``
    and ``REVIEW`` (a person accepts or rejects contested and quarantined records).

    Args:
        store: Where records live. The application owns it (opens and closes it); the worker
            never closes it.
        search: Recall/ranking for SEARCH; default the store's own search, else SEARCH fails
            with ``SEARCH_UNAVAILABLE``. CRUD always goes to ``store``.
        query_limit: QUERY page size when the request gives none (1..10000).
        search_limit: SEARCH hit count when the request gives none (1..10000).
        track_usage: Count each SEARCH hit as a use (``usage_count``, ``last_used_at``):
            ``None`` when the store has the ``UsageTracking`` capability, ``True`` always
            (refused for a store without it), ``False`` never.
        concurrency: Most calls one replica runs at once (``None``: unlimited).
        clock: Time of usage stamps, audit entries and retention.
        access: Access control (default: off); see :mod:`workers.memory.worker.access`.
        audit: Append every read and write decision to the store's audit log.
        retention: Rules for :func:`~workers.memory.maintenance.retention.run_hygiene`.
        hygiene_interval_s: Run hygiene with ``retention`` every this many seconds in the
            background (never two runs at once); ``None``: only when asked.
        embedder: Embeds every written record (in the write's transaction) and SEARCH queries,
            turning on the ``vector`` and ``hybrid`` strategies (``auto`` becomes hybrid).
        search_settings: Defaults of the hybrid strategy (fusion, weights, ``min_score``).
        policy: The write policy (trust scale, stage modes, expiry per category); default:
            every stage off, the default trust scale.

    Raises:
        InvalidInputError: A limit is not an integer from 1 to 10000, a hygiene interval
            without a retention policy, or a capability the store lacks (``audit`` without an
            audit log, ``embedder`` without vectors, ``track_usage=True`` without usage).
    """
    if not isinstance(store, MemoryStore):
        raise InvalidInputError("store must be a MemoryStore")
    if search is not None and not isinstance(search, MemorySearchProvider):
        raise InvalidInputError("search must have an async search(input, ctx) method")
    if hygiene_interval_s is not None and (
        retention is None
        or isinstance(hygiene_interval_s, bool)
        or not isinstance(hygiene_interval_s, int | float)
        or not 0 < hygiene_interval_s < math.inf
    ):
        raise InvalidInputError("hygiene_interval_s needs a retention policy and a positive number")
    if track_usage and not isinstance(store, UsageTracking):
        raise InvalidInputError(f"{type(store).__name__} keeps no usage counters")
    if embedder is not None:
        model_of(embedder)  # a clear error now, not at the first write
        if not isinstance(store, VectorStore):
            raise InvalidInputError(
                f"{type(store).__name__} keeps no vectors: it cannot take an embedder"
            )
    control = AccessControl(access or AccessPolicy(), store, audit=audit, clock=clock)
    nodes = _MemoryNodes(
        store,
        search or SearchEngine(store, embedder, search_settings),
        _check_limit("query_limit", query_limit),
        _check_limit("search_limit", search_limit),
        store if track_usage is not False and isinstance(store, UsageTracking) else None,
        clock,
        control,
        embedder,
        policy,
    )
    hygiene = None
    if retention is not None and hygiene_interval_s is not None:
        hygiene = PeriodicHygiene(store, retention, float(hygiene_interval_s), clock)
        nodes.hygiene = hygiene
    return define_worker(
        "memory",
        {
            node_type: control.audit_failures(backend_boundary(handler))
            for node_type, handler in (
                ("MEMORY.GET", nodes.get),
                ("MEMORY.QUERY", nodes.query),
                ("MEMORY.SEARCH", nodes.search),
                ("MEMORY.WRITE", nodes.write),
                ("MEMORY.UPDATE", nodes.update),
                ("MEMORY.DELETE", nodes.delete),
                ("MEMORY.REVIEW", nodes.review),
            )
        },
        concurrency=concurrency,
        dispose=None if hygiene is None else hygiene.stop,
        # Outputs are built here from records the store returned, each checked by
        # boundary.check_items: re-validating pages of records would double a read's cost.
        trusted_outputs=True,
    )
