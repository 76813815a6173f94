"""Load ``ditto.yaml`` and the environment into :class:`~ditto.app.config.settings.Settings`.

Loading is strict and side-effect free: unknown keys, duplicate keys, YAML aliases and merge
keys, wrong types, out-of-range values and anything that looks like a credential fail with a
:class:`~ditto.errors.ConfigError` naming the key path; no ``.env`` file is read and no connection
is opened. Error messages never echo a configured value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ditto.app.config.settings import ENV_ONLY, Settings
from ditto.errors import ConfigError

__all__ = ("CONFIG_ENV_VAR", "DEFAULT_CONFIG_FILE", "load_config", "resolve_config_path")

DEFAULT_CONFIG_FILE = "ditto.yaml"
CONFIG_ENV_VAR = "DITTO_CONFIG"

_CREDENTIAL_WORDS = frozenset(
    {"password", "passwd", "secret", "token", "apikey", "credential", "credentials", "dsn", "url"}
)
_CREDENTIAL_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
_URL_WITH_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/?#\s]*@", re.IGNORECASE)


def resolve_config_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """The file :func:`load_config` reads: ``path``, else ``$DITTO_CONFIG``, else ``./ditto.yaml``
    when it exists, else ``None`` (library defaults)."""
    if path is not None:
        return Path(path)
    if env.get(CONFIG_ENV_VAR):
        return Path(env[CONFIG_ENV_VAR])
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Resolve the effective settings.

    Args:
        path: A YAML file. ``None`` reads ``$DITTO_CONFIG`` or ``./ditto.yaml`` if present, else
            uses library defaults.
        env: Environment to read URL and credential overrides from (default ``os.environ``).

    Returns:
        Frozen :class:`Settings`.

    Raises:
        ConfigError: ``INVALID_CONFIG``; the message names the file and the key path.
    """
    env = os.environ if env is None else env
    source = resolve_config_path(path, env)
    tree: dict[str, Any] = {}
    label = "defaults"
    if source is not None:
        label = str(source)
        tree = _read_yaml(source)
        _reject_credentials(tree, label)
    for key_path, variable in ENV_ONLY.items():
        value = env.get(variable)
        if value:
            _insert(tree, key_path, value)
    try:
        return Settings.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, label)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration ({type(exc).__name__})") from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{where}") from None
    except RecursionError:  # PyYAML recurses once per level of nesting
        raise ConfigError(f"{path}: the YAML is nested too deeply to be a configuration") from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit
        raise ConfigError(f"{path}: the YAML holds a number too long to read") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return document


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, anchors, aliases and merge keys: each of them
    makes a configuration mean something other than what a reader sees."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1 if event.start_mark else 0
            raise ConfigError(f"YAML anchors and aliases are not allowed (line {line})")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConfigError(f"YAML merge keys are not allowed (line {line})")
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise ConfigError(f"keys must be plain strings (line {line})")
            if key in seen:
                raise ConfigError(f"duplicate key {key!r} (line {line})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_NAMES_ARE_DATA = frozenset({("workers", "memory", "policy", "safety", "actions")})
"""Mappings whose keys name things, not settings: the safety stage's kinds (``api_key``,
``jwt``) are what it detects, never a credential."""


def _reject_credentials(tree: Any, label: str, path: tuple[str, ...] = ()) -> None:
    if isinstance(tree, dict):
        names_are_data = path in _NAMES_ARE_DATA
        for key, value in tree.items():
            key_path = (*path, str(key))
            dotted = ".".join(key_path)
            variable = ENV_ONLY.get(key_path)
            if variable is not None:
                raise ConfigError(
                    f"{label}: {dotted}: URLs and credentials are not allowed in YAML; "
                    f"set {variable} in the environment"
                )
            if not names_are_data and _looks_like_credential(str(key)):
                raise ConfigError(
                    f"{label}: {dotted}: looks like a credential or URL; these come from the "
                    "environment, never from ditto.yaml"
                )
            _reject_credentials(value, label, key_path)
    elif isinstance(tree, list):
        for index, item in enumerate(tree):
            _reject_credentials(item, label, (*path, str(index)))
    elif isinstance(tree, str) and _URL_WITH_USERINFO.match(tree):
        raise ConfigError(f"{label}: {'.'.join(path)}: contains a URL with credentials")


def _looks_like_credential(key: str) -> bool:
    # Whole words only, so "max_tokens" or "key_prefix" stay legal while "api_key",
    # "redis_url" or "password" do not.
    words = [word for word in re.split(r"[_\-.\s]+", key.lower()) if word]
    return any(word in _CREDENTIAL_WORDS for word in words) or any(
        pair in _CREDENTIAL_PAIRS for pair in pairwise(words)
    )


def _insert(tree: dict[str, Any], key_path: tuple[str, ...], value: str) -> None:
    node = tree
    for key in key_path[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return  # the YAML already has a wrong type here; validation reports it
        node = child
    node[key_path[-1]] = value


def _describe(exc: ValidationError, label: str) -> str:
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        dotted = ".".join(str(part) for part in error["loc"])
        variable = ENV_ONLY.get(tuple(str(part) for part in error["loc"]))
        where = f"{variable} (environment)" if variable else f"{label}: {dotted}"
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{where}: {message}")
    return "; ".join(lines)
