"""The one place that turns :class:`~ditto.app.config.Settings` into stores, workers and a runtime.

The runtime core never imports a worker; applications that want "what ``ditto.yaml`` says" call
:func:`open_runtime` instead of wiring stores by hand::

    async with open_runtime() as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "hello"}]})
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from ditto.app.config import Settings, load_config
from ditto.app.config.policy_settings import PolicyOverrideSettings, PolicyStagesSettings
from ditto.app.config.retrieval_settings import RetrievalTargetSettings
from ditto.contracts.node_types import NodeContract
from ditto.errors import ConfigError, ErrorCode
from ditto.runtime.runtime import Ditto, create_ditto
from ditto.runtime.worker import WorkerDefinition

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.port import CheckpointStore
    from workers.context.stores.base import ContextStateStore
    from workers.memory.maintenance.retention import RetentionPolicy
    from workers.memory.policy.config import WritePolicy
    from workers.memory.ports import MemoryStore
    from workers.memory.retrieval.embeddings.base import Embedder
    from workers.memory.retrieval.hybrid import SearchSettings
    from workers.retrieval.ports import RetrievalProvider

__all__ = (
    "build_context_store",
    "build_context_worker",
    "build_embedder",
    "build_memory_store",
    "build_memory_worker",
    "build_retention",
    "build_retrieval_worker",
    "build_search_settings",
    "open_runtime",
    "register_remote_workers",
    "remote_contracts",
)


def build_memory_store(settings: Settings, *, existing: bool = False) -> MemoryStore:
    """The memory store ``settings`` describe (not opened yet).

    Args:
        settings: The configuration.
        existing: Only open a store that exists (for commands that read): an SQLite file or a
            Markdown folder is never created, and an SQLite file that cannot be written is
            opened read-only.

    Raises:
        MemoryStoreError: ``STORE_UNAVAILABLE``: there is no SQLite file or Markdown folder
            (``existing``), or the postgres or mysql backend without its extra (the message
            names the install command).
    """
    from workers.memory.ports import VectorStore
    from workers.memory.retrieval.ann_index import AnnSettings

    store = _memory_store(settings, existing)
    if isinstance(store, VectorStore):
        store.configure_ann(AnnSettings(**settings.workers.memory.ann.model_dump()))
    return store


def _memory_store(settings: Settings, existing: bool) -> MemoryStore:
    from workers.memory import (
        InProcessMemoryStore,
        MemoryStoreError,
        SqliteMemoryStore,
    )

    memory = settings.workers.memory
    if memory.backend == "inprocess":
        return InProcessMemoryStore()
    if memory.backend == "markdown":
        from workers.memory.stores.markdown import MarkdownMemoryStore

        folder = memory.markdown_folder
        if existing and not folder.is_dir():
            raise MemoryStoreError(f"no memory store at {folder}", code=ErrorCode.STORE_UNAVAILABLE)
        return MarkdownMemoryStore(folder)
    if memory.backend == "postgres":
        from ditto.app.memory_setup import postgres_store_type

        assert memory.postgres_url is not None  # the settings refuse postgres without a URL
        return postgres_store_type().from_url(
            memory.postgres_url.get_secret_value(),
            schema=memory.postgres_schema,
            pool_size=memory.postgres_pool_size,
            statement_timeout_ms=memory.postgres_statement_timeout_ms,
        )
    if memory.backend == "mysql":
        from ditto.app.memory_setup import mysql_store_type

        assert memory.mysql_url is not None  # the settings refuse mysql without a URL
        return mysql_store_type().from_url(
            memory.mysql_url.get_secret_value(), pool_size=memory.mysql_pool_size
        )
    path = memory.sqlite_file
    if not existing:  # the file is made if missing, not its folder: a typo is not a new store
        return SqliteMemoryStore(path, create_folder=False)
    if not path.is_file():
        raise MemoryStoreError(f"no memory store at {path}", code=ErrorCode.STORE_UNAVAILABLE)
    # WAL readers need to write the -shm file beside the database, so the folder counts too.
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return SqliteMemoryStore(path, read_only=not writable)


def build_embedder(settings: Settings) -> Embedder | None:
    """The embedder of ``workers.memory.embedder`` (``None`` for keyword search only)."""
    from workers.memory.retrieval.embeddings import HashingEmbedder, MiniLMEmbedder
    from workers.memory.retrieval.embeddings.e5 import E5SmallEmbedder

    embedder = settings.workers.memory.embedder
    if embedder.kind == "hashing":
        return HashingEmbedder(embedder.dimension)
    models = {"minilm": MiniLMEmbedder, "e5-small": E5SmallEmbedder}
    return models[embedder.kind]() if embedder.kind in models else None


def build_search_settings(settings: Settings) -> SearchSettings:
    from workers.memory.retrieval.hybrid import SearchSettings

    return SearchSettings(**settings.workers.memory.search.model_dump())


def build_retention(settings: Settings) -> RetentionPolicy:
    """The retention rules of ``workers.memory.retention`` in the configuration."""
    from workers.memory import RetentionPolicy, RetentionRule

    retention = settings.workers.memory.retention
    return RetentionPolicy(
        {name: RetentionRule(**rule.model_dump()) for name, rule in retention.categories.items()},
        audit_days=retention.audit_days,
        purge_grace_days=retention.purge_grace_days,
    )


def build_context_store(settings: Settings) -> ContextStateStore | None:
    """The Redis context store when ``DITTO_WORKER_CONTEXT_REDIS_URL`` is set, else ``None``
    (explicit mode only). Never a silent in-process fallback."""
    from workers.context import RedisContextStore

    context = settings.workers.context
    if context.redis_url is None:
        return None
    return RedisContextStore.from_url(
        context.redis_url.get_secret_value(),
        ttl_ms=context.cache.ttl_ms,
        key_prefix=context.cache.key_prefix,
    )


def build_context_worker(settings: Settings, store: ContextStateStore | None) -> WorkerDefinition:
    """The CONTEXT worker with the configured policy and (optional) per-scope queue."""
    from workers.context import ContextPolicy, ScopeQueue, create_context_worker

    context = settings.workers.context
    policy = ContextPolicy(**context.policy.model_dump())
    queue = ScopeQueue(context.queue.max_pending) if context.queue.enabled else None
    return create_context_worker(store=store, policy=policy, queue=queue)


def remote_contracts(node_types: Iterable[str]) -> list[NodeContract | str]:
    """Contracts for remote node types: the MEMORY, CONTEXT and RETRIEVAL workers' own (so
    inputs are validated before they are sent), the bare name for any other node type."""
    from workers.context import create_context_worker
    from workers.memory import InProcessMemoryStore, create_memory_worker
    from workers.retrieval.worker import SEARCH_CONTRACT

    known: dict[str, NodeContract] = {SEARCH_CONTRACT.node_type: SEARCH_CONTRACT}
    for definition in (create_memory_worker(InProcessMemoryStore()), create_context_worker()):
        known.update({node_type: bound.contract for node_type, bound in definition.nodes.items()})
    return [known.get(node_type, node_type) for node_type in node_types]


def register_remote_workers(runtime: Ditto, settings: Settings) -> None:
    """Route ``runtime.remote.node_types`` to remote workers (no-op when there are none).

    Raises:
        ConfigError: ``DITTO_REMOTE_SECRET`` is missing or too short.
    """
    from ditto.adapters.redis.streams import RedisStreamsTransport
    from ditto.runtime.transports.envelope import Signer

    remote = settings.runtime.remote
    if not remote.node_types or remote.redis_url is None:
        return
    transport = RedisStreamsTransport.from_url(
        remote.redis_url.get_secret_value(),
        Signer.from_environment(),
        prefix=remote.prefix,
        max_pending=remote.max_pending,
    )
    runtime.register_remote(
        remote_contracts(remote.node_types), transport=transport, concurrency=remote.concurrency
    )


MEMORY_NODE_TYPES = frozenset(
    f"MEMORY.{verb}" for verb in ("GET", "QUERY", "SEARCH", "WRITE", "UPDATE", "DELETE")
)
CONTEXT_NODE_TYPES = frozenset(
    f"CONTEXT.{verb}" for verb in ("LOAD", "SELECT", "UPDATE", "COMPRESS")
)
RETRIEVAL_NODE_TYPE = "RETRIEVAL.SEARCH"


def local_part(worker: WorkerDefinition, elsewhere: frozenset[str]) -> WorkerDefinition:
    """``worker`` without the node types that run ``elsewhere`` (on remote workers): a local
    replica would otherwise take them first, since local replicas rank before remote ones."""
    if not worker.node_types & elsewhere:
        return worker
    kept = {name: node for name, node in worker.nodes.items() if name not in elsewhere}
    return dataclasses.replace(worker, nodes=MappingProxyType(kept))


@asynccontextmanager
async def open_runtime(
    settings: Settings | None = None,
    *,
    workers: Iterable[WorkerDefinition] = (),
    existing: bool = False,
    memory: bool = True,
    context: bool = True,
    retrieval: bool = True,
    remote: bool = True,
    store: MemoryStore | None = None,
    checkpoints: CheckpointStore | None = None,
) -> AsyncIterator[Ditto]:
    """A runtime with the configured MEMORY and CONTEXT workers (plus ``workers``), closed on
    exit. Stores are opened first and closed last, after the runtime has drained. Node types
    listed in ``runtime.remote.node_types`` go to remote workers instead: the local worker of
    their kind is not built.

    Args:
        settings: Configuration; default :func:`~ditto.app.config.load_config` (``ditto.yaml`` and
            the environment).
        workers: More worker definitions to register.
        existing: Only open a memory store that exists (see :func:`build_memory_store`).
        memory: Build the MEMORY worker (and open its store).
        context: Build the CONTEXT worker.
        retrieval: Build the RETRIEVAL worker when ``workers.retrieval.targets`` has any (a
            memory target opens the memory store if the MEMORY worker did not).
        remote: Route ``runtime.remote.node_types`` to remote workers (a worker process that
            serves them passes ``False``).
        store: An opened memory store for the MEMORY worker instead of the configured one
            (its caller opens and closes it: ``ditto ui`` also reads its history and audit log).
        checkpoints: Where checkpointed and interrupted runs keep their state (see
            :class:`~ditto.runtime.runtime.Ditto`).
    """
    settings = settings if settings is not None else load_config()
    elsewhere = frozenset(settings.runtime.remote.node_types) if remote else frozenset()
    # A kind's local worker keeps the node types not listed as remote; only when every one of
    # them is remote is it (and its store) not built at all.
    memory = memory and not elsewhere >= MEMORY_NODE_TYPES
    context = context and not elsewhere >= CONTEXT_NODE_TYPES
    targets = settings.workers.retrieval.targets
    retrieval = retrieval and bool(targets) and RETRIEVAL_NODE_TYPE not in elsewhere
    async with AsyncExitStack() as stack:
        local = list(workers)
        store = None
        if memory:
            if store is None:
                store = await stack.enter_async_context(
                    build_memory_store(settings, existing=existing)
                )
            local.insert(0, local_part(build_memory_worker(settings, store), elsewhere))
        if retrieval:
            if store is None and any(t.kind == "memory" for t in targets.values()):
                store = await stack.enter_async_context(build_memory_store(settings, existing=True))
            local.append(build_retrieval_worker(settings, store))
        if context:
            context_store = build_context_store(settings)
            if context_store is not None:
                stack.push_async_callback(context_store.aclose)
            local.append(local_part(build_context_worker(settings, context_store), elsewhere))
        runtime = await stack.enter_async_context(
            create_ditto(config=settings, workers=local, checkpoints=checkpoints)
        )
        if remote:
            register_remote_workers(runtime, settings)
        yield runtime


def build_memory_worker(settings: Settings, store: MemoryStore) -> WorkerDefinition:
    """The MEMORY worker over ``store``, as ``workers.memory`` configures it (``track_usage``
    only where the store keeps usage counters: the Markdown store does not)."""
    from workers.memory import AccessPolicy, create_memory_worker
    from workers.memory.ports import UsageTracking

    memory = settings.workers.memory
    search = None
    if memory.search_target is not None:
        from workers.retrieval import RetrievalSearchProvider

        search = RetrievalSearchProvider(memory.search_target)
    return create_memory_worker(
        store,
        search,
        query_limit=memory.query_limit,
        search_limit=memory.search_limit,
        track_usage=memory.track_usage and isinstance(store, UsageTracking),
        access=AccessPolicy(memory.acl.mode, memory.acl.default_visibility),
        audit=memory.audit,
        retention=build_retention(settings),
        hygiene_interval_s=memory.retention.interval_s,
        embedder=build_embedder(settings),
        search_settings=build_search_settings(settings),
        policy=build_write_policy(settings),
    )


def build_retrieval_worker(settings: Settings, store: MemoryStore | None) -> WorkerDefinition:
    """The RETRIEVAL worker over ``workers.retrieval.targets`` (``store``: the memory store a
    ``memory`` target searches). It closes the corpus and Milvus providers it built; ``store``
    stays the caller's.

    Raises:
        ConfigError: A ``memory`` target without a store.
    """
    from workers.memory import AccessPolicy
    from workers.retrieval import CorpusProvider, MemoryStoreProvider, create_retrieval_worker

    retrieval = settings.workers.retrieval
    memory = settings.workers.memory
    embedder = build_embedder(settings)
    providers: dict[str, RetrievalProvider] = {}
    for name, target in retrieval.targets.items():
        if target.kind == "memory":
            if store is None:
                raise ConfigError(f"workers.retrieval.targets.{name}: no memory store is open")
            providers[name] = MemoryStoreProvider(
                store,
                embedder,
                settings=build_search_settings(settings),
                access=AccessPolicy(memory.acl.mode, memory.acl.default_visibility),
            )
        elif target.kind == "corpus":
            assert target.path is not None  # the settings refuse a corpus without a path
            providers[name] = CorpusProvider(
                Path(target.path).expanduser(),
                embedder,
                settings=build_search_settings(settings),
                chunk_words=target.chunk_words,
                cache=target.cache,
            )
        else:
            providers[name] = _milvus_provider(name, target, embedder)
    return create_retrieval_worker(providers, search_limit=retrieval.search_limit, own_targets=True)


def _milvus_provider(
    name: str, target: RetrievalTargetSettings, embedder: Embedder | None
) -> RetrievalProvider:
    if embedder is None:
        raise ConfigError(
            f"workers.retrieval.targets.{name}: a milvus target needs workers.memory.embedder"
        )
    try:
        from workers.retrieval.providers.milvus import MilvusProvider
    except ImportError as exc:
        raise ConfigError(f"workers.retrieval.targets.{name}: {exc}") from None
    assert target.path is not None  # the settings refuse a milvus target without one
    assert target.collection is not None
    path = str(Path(target.path).expanduser())
    return MilvusProvider.from_uri(path, target.collection, embedder, index=target.index)


def build_write_policy(settings: Settings) -> WritePolicy:
    """The write policy ``workers.memory.policy`` configures."""
    from workers.memory.policy.config import StageModes, WritePolicy
    from workers.memory.policy.safety_rules import SafetyRules

    policy = settings.workers.memory.policy

    def modes(stages: PolicyStagesSettings | PolicyOverrideSettings) -> StageModes:
        return StageModes(stages.safety, stages.dedupe, stages.contradiction)

    return WritePolicy(
        modes(policy.stages),
        {namespace: modes(stages) for namespace, stages in policy.namespaces.items()},
        {category: modes(stages) for category, stages in policy.categories.items()},
        tuple(policy.trust_levels),
        policy.default_trust,
        {category: round(days * 86_400) for category, days in policy.ttl_days.items()},
        SafetyRules.from_mapping(policy.safety),
        policy.renew_on_read,
    )
