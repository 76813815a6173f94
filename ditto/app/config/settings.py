"""The frozen settings tree that ``ditto.yaml`` and the environment resolve to.

Every model is strict (no coercion from strings), forbids unknown keys and is frozen. Behaviour
defaults live in YAML; URLs and credentials only ever come from the environment (see
``ENV_ONLY``) and are held as ``SecretStr`` so they never print by accident.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ditto.app.config.memory_settings import (
    AnnIndexSettings,
    EmbedderSettings,
    MemoryAclSettings,
    MemoryRetentionSettings,
    MemorySearchSettings,
    RetentionRuleSettings,
)
from ditto.app.config.policy_settings import MemoryPolicySettings
from ditto.app.config.retrieval_settings import RetrievalTargetSettings, RetrievalWorkerSettings
from ditto.app.urls import split_schema, url_problem
from ditto.contracts.node_types import is_node_type
from ditto.runtime.limits import DEFAULT_LIMITS, RuntimeLimits

__all__ = (
    "ENV_ONLY",
    "AnnIndexSettings",
    "ContextCacheSettings",
    "ContextPolicySettings",
    "ContextQueueSettings",
    "ContextWorkerSettings",
    "EmbedderSettings",
    "MemoryAclSettings",
    "MemoryRetentionSettings",
    "MemorySearchSettings",
    "MemoryWorkerSettings",
    "RemoteSettings",
    "RetentionRuleSettings",
    "RetrievalTargetSettings",
    "RetrievalWorkerSettings",
    "RuntimeSettings",
    "Settings",
    "WorkersSettings",
    "redact_url",
)

MAX_TIMEOUT_MS = 2**31 - 1
MAX_CHECKPOINT_LEASE_MS = 86_400_000
"""A day: the longest lease a checkpoint store takes."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RemoteSettings(_Strict):
    """``runtime.remote:`` — workers in other processes, over Redis Streams."""

    node_types: list[str] = Field(default_factory=list)
    """Node types this runtime sends to remote workers (``ditto worker serve``); the local
    MEMORY or CONTEXT worker is not built when one of its node types is listed."""
    prefix: str = Field("ditto:", min_length=1, max_length=100)
    """Key prefix shared by the runtime and its workers."""
    concurrency: int | None = Field(None, ge=1, le=1_000_000)
    """Most calls this runtime has in flight to remote workers (more wait for a free slot,
    first come first served, within their deadlines); ``null`` = unlimited."""
    max_pending: int = Field(10_000, ge=1, le=10_000_000)
    """Calls of one node type waiting or running before new ones get ``QUEUE_FULL``."""
    claim_idle_ms: int = Field(5_000, ge=100, le=MAX_TIMEOUT_MS)
    """Workers take over a call left this long by a worker that stopped renewing it (a live
    worker renews its calls every fifth of it, from a thread of its own, so a handler that
    blocks the event loop is not taken from it). Well inside the default node deadline: a dead
    worker's calls are redelivered in time to succeed."""
    heartbeat_ms: int = Field(1_000, ge=50, le=60_000)
    """How often a worker announces itself; three missed beats and it counts as gone."""
    redis_url: SecretStr | None = None
    """From ``DITTO_RUNTIME_REMOTE_REDIS_URL`` only (never YAML)."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        _check_url(value, ("redis", "rediss", "unix"), "DITTO_RUNTIME_REMOTE_REDIS_URL")
        return value

    @model_validator(mode="after")
    def _needs_url(self) -> Self:
        if self.node_types and self.redis_url is None:
            raise ValueError(
                "runtime.remote.node_types needs DITTO_RUNTIME_REMOTE_REDIS_URL in the environment"
            )
        for node_type in self.node_types:
            if not is_node_type(node_type):
                raise ValueError(f"runtime.remote.node_types: {node_type!r} is not DOMAIN.VERB")
        return self


class RuntimeSettings(_Strict):
    """``runtime:`` — scheduling defaults."""

    timeout_ms: int = Field(DEFAULT_LIMITS.timeout_ms, ge=1, le=MAX_TIMEOUT_MS)
    """Deadline of every node invocation unless the call, the task or the run sets a shorter
    one (milliseconds, 1..2^31-1)."""
    graph_concurrency: int | None = Field(DEFAULT_LIMITS.graph_concurrency, ge=1, le=1_000_000)
    """Most tasks of one graph run in flight at once; ``null`` is unlimited. A ``concurrency``
    argument to ``run()`` takes precedence."""
    stall_warning_ms: int | None = Field(DEFAULT_LIMITS.stall_warning_ms, ge=1, le=MAX_TIMEOUT_MS)
    """Log a warning naming the handler when the event loop is blocked this long; ``null``
    turns the watchdog off."""
    loop_max_iterations: int = Field(DEFAULT_LIMITS.loop_max_iterations, ge=1, le=1_000_000)
    """Most graph executions of one ``runtime.loop``, unless its definition sets a limit."""
    checkpoint_lease_ms: int = Field(
        DEFAULT_LIMITS.checkpoint_lease_ms, ge=100, le=MAX_CHECKPOINT_LEASE_MS
    )
    """How long a checkpointed run's lease outlives its last renewal (renewed every third of
    it): a second opener of the checkpoint gets ``CHECKPOINT_BUSY`` meanwhile, and a run
    killed with ``kill -9`` keeps its checkpoint this long from the next one."""
    tracing: bool = DEFAULT_LIMITS.tracing
    """Record OpenTelemetry spans (a run, each task, each checkpoint write) through the global
    tracer provider; needs the ``otel`` extra."""
    remote: RemoteSettings = RemoteSettings()


def _check_url(value: SecretStr | None, schemes: tuple[str, ...], variable: str) -> None:
    if value is None:
        return
    problem = url_problem(value.get_secret_value(), schemes)
    if problem is not None:
        raise ValueError(f"{variable}: {problem}")  # never the value: it may hold a password


class MemoryWorkerSettings(_Strict):
    """``workers.memory:`` — the MEMORY worker."""

    backend: Literal["sqlite", "postgres", "mysql", "markdown", "inprocess"] = "sqlite"
    """Where records live: ``sqlite`` (one file, the embedded default), ``postgres``
    (``DITTO_WORKER_MEMORY_POSTGRES_URL``, the ``postgres`` extra), ``mysql`` (MySQL 8 or
    MariaDB 10.6+, ``DITTO_WORKER_MEMORY_MYSQL_URL``, the ``mysql`` extra), ``markdown`` (a
    folder of Markdown files a person can edit and keep in git) or ``inprocess`` (lost when
    the process exits; for tests and experiments)."""
    sqlite_path: str = Field("memory.sqlite", min_length=1)
    """The SQLite file, relative to the working directory (``:memory:`` is refused)."""

    @property
    def sqlite_file(self) -> Path:
        """``sqlite_path`` with ``~`` expanded: the file every command and the runtime open."""
        return Path(self.sqlite_path).expanduser()

    markdown_path: str = Field("memory", min_length=1)
    """The Markdown store's folder, relative to the working directory (created if missing)."""

    @property
    def markdown_folder(self) -> Path:
        """``markdown_path`` with ``~`` expanded."""
        return Path(self.markdown_path).expanduser()

    query_limit: int = Field(100, ge=1, le=10_000)
    """QUERY page size when a request gives none."""
    search_limit: int = Field(10, ge=1, le=10_000)
    """SEARCH hits when a request gives none."""
    track_usage: bool = True
    """Count SEARCH hits as uses (``usage_count``, ``last_used_at``); ignored by a store
    without usage counters (``markdown``)."""
    acl: MemoryAclSettings = MemoryAclSettings()
    policy: MemoryPolicySettings = MemoryPolicySettings()
    audit: bool = False
    """Append every read and write decision (principal, node, record ids, decision, time) to
    the store's audit log."""
    retention: MemoryRetentionSettings = MemoryRetentionSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    search: MemorySearchSettings = MemorySearchSettings()
    ann: AnnIndexSettings = AnnIndexSettings()
    search_target: str | None = Field(None, min_length=1, max_length=256)
    """Hand every SEARCH to ``RETRIEVAL.SEARCH`` on this target (a memory target of a RETRIEVAL
    worker, here or remote) instead of searching the store here; ``null``: search here."""
    postgres_schema: str = Field("ditto", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """The PostgreSQL schema holding the memory tables (created if missing)."""
    postgres_pool_size: int = Field(10, ge=1, le=1000)
    """Connections in the PostgreSQL pool."""
    postgres_statement_timeout_ms: int = Field(30_000, ge=1, le=MAX_TIMEOUT_MS)
    """Longest a PostgreSQL statement may run before it fails with STORE_TIMEOUT."""
    postgres_url: SecretStr | None = None
    """From ``DITTO_WORKER_MEMORY_POSTGRES_URL`` only (never YAML)."""

    mysql_pool_size: int = Field(10, ge=1, le=1000)
    """Connections in the MySQL pool."""
    mysql_url: SecretStr | None = None
    """From ``DITTO_WORKER_MEMORY_MYSQL_URL`` only (never YAML):
    ``mysql://user:password@host:3306/database``."""

    @field_validator("postgres_url")
    @classmethod
    def _postgres_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        variable = "DITTO_WORKER_MEMORY_POSTGRES_URL"
        _check_url(value, ("postgresql", "postgres"), variable)
        if value is not None and split_schema(value.get_secret_value())[1] is not None:
            # asyncpg would send it to the server as a setting, which refuses it.
            raise ValueError(f"{variable}: name the schema in workers.memory.postgres_schema")
        return value

    @field_validator("mysql_url")
    @classmethod
    def _mysql_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        _check_url(value, ("mysql", "mariadb"), "DITTO_WORKER_MEMORY_MYSQL_URL")
        return value

    @model_validator(mode="after")
    def _backend_needs_a_url(self) -> Self:
        if self.backend == "postgres" and self.postgres_url is None:
            raise ValueError(
                "backend postgres needs DITTO_WORKER_MEMORY_POSTGRES_URL in the environment"
            )
        if self.backend == "mysql" and self.mysql_url is None:
            raise ValueError("backend mysql needs DITTO_WORKER_MEMORY_MYSQL_URL in the environment")
        if self.search.rerank != "off" and self.embedder.kind == "none":
            raise ValueError(
                f"search.rerank {self.search.rerank} needs an embedder (workers.memory.embedder)"
            )
        return self


class ContextPolicySettings(_Strict):
    """``workers.context.policy:`` — limits every CONTEXT call enforces (requests may only
    tighten them)."""

    max_inline_bytes: int = Field(65_536, ge=1, le=1_000_000)
    """Most UTF-8 bytes of an item's inline content (items with a reference are exempt)."""
    max_items: int = Field(256, ge=1, le=1_000_000)
    """Most items a context may hold after LOAD or UPDATE."""
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    """Token ceiling for SELECT and COMPRESS budgets; null: only what requests ask."""
    duplicate: Literal["replace", "keep-first", "reject"] = "replace"
    """What an item id already present does."""
    missing_removal: Literal["ignore", "reject"] = "ignore"
    """What removing an absent id does."""


class ContextCacheSettings(_Strict):
    """``workers.context.cache:`` — scoped working sets in Redis."""

    ttl_ms: int = Field(3_600_000, ge=1, le=MAX_TIMEOUT_MS)
    """Lifetime of a scope's working set after its last write (reads do not extend it)."""
    key_prefix: str = Field("ditto:context:", min_length=1)
    """Prefix of every Redis key the worker writes."""


class ContextQueueSettings(_Strict):
    """``workers.context.queue:`` — serialise calls per scope inside one process."""

    enabled: bool = False
    max_pending: int = Field(1024, ge=1, le=1_000_000)
    """Calls running or waiting at once before new ones get QUEUE_FULL."""


class ContextWorkerSettings(_Strict):
    """``workers.context:`` — the CONTEXT worker."""

    policy: ContextPolicySettings = ContextPolicySettings()
    cache: ContextCacheSettings = ContextCacheSettings()
    queue: ContextQueueSettings = ContextQueueSettings()
    redis_url: SecretStr | None = None
    """From ``DITTO_WORKER_CONTEXT_REDIS_URL`` only (never YAML)."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        _check_url(value, ("redis", "rediss", "unix"), "DITTO_WORKER_CONTEXT_REDIS_URL")
        return value


class WorkersSettings(_Strict):
    """``workers:`` — per-worker settings."""

    memory: MemoryWorkerSettings = MemoryWorkerSettings()
    context: ContextWorkerSettings = ContextWorkerSettings()
    retrieval: RetrievalWorkerSettings = RetrievalWorkerSettings()


class Settings(_Strict):
    """The whole configuration; build it with :func:`ditto.app.config.load_config`."""

    runtime: RuntimeSettings = RuntimeSettings()
    workers: WorkersSettings = WorkersSettings()

    @property
    def limits(self) -> RuntimeLimits:
        """The runtime's limits (``runtime:``), as ``create_ditto(config=...)`` reads them."""
        runtime = self.runtime
        return RuntimeLimits(
            timeout_ms=runtime.timeout_ms,
            graph_concurrency=runtime.graph_concurrency,
            stall_warning_ms=runtime.stall_warning_ms,
            loop_max_iterations=runtime.loop_max_iterations,
            checkpoint_lease_ms=runtime.checkpoint_lease_ms,
            tracing=runtime.tracing,
        )


ENV_ONLY: dict[tuple[str, ...], str] = {
    ("runtime", "remote", "redis_url"): "DITTO_RUNTIME_REMOTE_REDIS_URL",
    ("workers", "memory", "postgres_url"): "DITTO_WORKER_MEMORY_POSTGRES_URL",
    ("workers", "memory", "mysql_url"): "DITTO_WORKER_MEMORY_MYSQL_URL",
    ("workers", "context", "redis_url"): "DITTO_WORKER_CONTEXT_REDIS_URL",
}
"""Settings that come from environment variables only: key path -> variable."""


def redact_url(secret: SecretStr | None) -> str | None:
    """The URL with everything before its last ``@`` (user name and password) replaced by
    ``***``, and without query or fragment.

    Works on the raw text rather than ``urlsplit``, which takes an unencoded ``/``, ``?`` or
    ``#`` inside a password for the end of the host part and would print the rest.
    """
    if secret is None:
        return None
    scheme, separator, rest = secret.get_secret_value().partition("://")
    if not separator:
        return "***"
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    return f"{scheme}://{rest.split('?', 1)[0].split('#', 1)[0]}"
