"""``load_config``: strict YAML + environment, errors that name the key and never a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditto import ConfigError, ErrorCode, Settings, load_config
from ditto.app.config.settings import ENV_ONLY

REPO_ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ditto.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_checked_in_ditto_yaml_loads_and_documents_the_defaults() -> None:
    assert load_config(REPO_ROOT / "ditto.yaml", env={}) == Settings()


def test_every_settings_key_is_documented_in_ditto_yaml() -> None:
    text = (REPO_ROOT / "ditto.yaml").read_text()

    def keys(model: type[Settings] | type, prefix: str = "") -> list[str]:
        found = []
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                found.extend(keys(annotation, f"{prefix}{name}."))
            else:
                found.append(f"{prefix}{name}")
        return found

    for dotted in keys(Settings):
        variable = ENV_ONLY.get(tuple(dotted.split(".")))
        if variable is not None:  # environment-only: documented by its variable
            assert variable in text, f"{variable} is not documented in ditto.yaml"
        else:
            leaf = dotted.rsplit(".", 1)[-1]
            assert f"{leaf}:" in text, f"{dotted} is not documented in ditto.yaml"


def test_no_file_means_library_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}) == Settings()


def test_values_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "runtime:\n  timeout_ms: 500\n  graph_concurrency: 4\n")
    settings = load_config(path, env={})
    assert settings.runtime.timeout_ms == 500
    assert settings.runtime.graph_concurrency == 4


def test_ditto_config_variable_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "runtime:\n  timeout_ms: 7\n")
    assert load_config(env={"DITTO_CONFIG": str(path)}).runtime.timeout_ms == 7


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("runtime:\n  timout_ms: 5\n", ["runtime.timout_ms", "unknown key"]),
        ("runtim:\n  timeout_ms: 5\n", ["runtim", "unknown key"]),
        ("runtime:\n  timeout_ms: '5'\n", ["runtime.timeout_ms", "integer"]),
        ("runtime:\n  timeout_ms: true\n", ["runtime.timeout_ms"]),
        ("runtime:\n  timeout_ms: 0\n", ["runtime.timeout_ms", "greater than or equal to 1"]),
        ("runtime:\n  timeout_ms: 2147483648\n", ["runtime.timeout_ms", "less than"]),
        ("runtime:\n  graph_concurrency: 0\n", ["runtime.graph_concurrency"]),
        ("runtime: 5\n", ["runtime"]),
        ("- a\n- b\n", ["top level must be a mapping"]),
        ("runtime:\n  timeout_ms: 5\n  timeout_ms: 6\n", ["duplicate key 'timeout_ms'", "line 3"]),
        ("a: &x {timeout_ms: 1}\nruntime: *x\n", ["anchors and aliases"]),
        ("runtime:\n  <<: {timeout_ms: 1}\n", ["merge keys"]),
        ("runtime: [unclosed\n", ["invalid YAML"]),
    ],
)
def test_bad_yaml_fails_naming_the_key(tmp_path: Path, text: str, fragments: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={})
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    for fragment in fragments:
        assert fragment in raised.value.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("workers:\n  context:\n    redis_url: redis://x\n", "DITTO_WORKER_CONTEXT_REDIS_URL"),
        (
            "workers:\n  memory:\n    postgres_url: postgresql://u:hunter2@h/db\n",
            "DITTO_WORKER_MEMORY_POSTGRES_URL",
        ),
        (
            "workers:\n  memory:\n    mysql_url: mysql://u:hunter2@h/db\n",
            "DITTO_WORKER_MEMORY_MYSQL_URL",
        ),
        ("runtime:\n  api_key: hunter2\n", "runtime.api_key: looks like a credential"),
        ("runtime:\n  password: hunter2\n", "runtime.password"),
        ("runtime:\n  note: 'redis://admin:hunter2@cache:6379'\n", "runtime.note: contains a URL"),
    ],
)
def test_secrets_in_yaml_are_refused_without_echoing_them(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={})
    assert fragment in raised.value.message
    assert "hunter2" not in str(raised.value)


def test_words_that_merely_contain_a_secret_word_are_not_flagged(tmp_path: Path) -> None:
    # "max_tokens" is a legitimate key name; it must fail as unknown, not as a credential.
    path = write(tmp_path, "runtime:\n  max_tokens: 5\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(path, env={})


def test_urls_come_from_the_environment() -> None:
    settings = load_config(
        env={
            "DITTO_CONFIG": str(REPO_ROOT / "ditto.yaml"),
            "DITTO_WORKER_CONTEXT_REDIS_URL": "redis://:hunter2@127.0.0.1:6379/0",
            "DITTO_WORKER_MEMORY_POSTGRES_URL": "postgresql://postgres@127.0.0.1/test",
            "DITTO_WORKER_MEMORY_MYSQL_URL": "mysql://root:hunter2@127.0.0.1:3306/test",
        }
    )
    redis_url = settings.workers.context.redis_url
    assert redis_url is not None
    assert redis_url.get_secret_value() == "redis://:hunter2@127.0.0.1:6379/0"
    assert "hunter2" not in repr(settings)
    assert settings.workers.memory.postgres_url is not None
    assert settings.workers.memory.mysql_url is not None


def test_a_bad_environment_url_names_the_variable_not_the_value() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(env={"DITTO_WORKER_CONTEXT_REDIS_URL": "http://user:hunter2@host"})
    assert "DITTO_WORKER_CONTEXT_REDIS_URL" in raised.value.message
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://app:hunter2@db.internal:notaport/prod", "port must be a number"),
        ("postgresql://app:hunter2@[::1/prod", "host is not a valid name"),
        ("http://app:hunter2@db.internal/prod", "scheme postgresql"),
    ],
)
def test_a_bad_url_says_what_is_wrong_without_quoting_it(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(env={"DITTO_WORKER_MEMORY_POSTGRES_URL": url})
    assert problem in raised.value.message
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize(
    ("variable", "url", "problem"),
    [
        ("DITTO_WORKER_CONTEXT_REDIS_URL", "redis://:hunter2@h:6379/notadb", "must be a number"),
        ("DITTO_RUNTIME_REMOTE_REDIS_URL", "rediss://:hunter2@h/db1", "must be a number"),
        ("DITTO_WORKER_MEMORY_POSTGRES_URL", "postgresql://u:hunter2@h/db?schema=x", "schema"),
    ],
)
def test_a_url_part_a_driver_would_ignore_or_misread_is_refused(
    variable: str, url: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(env={variable: url})
    assert variable in raised.value.message
    assert problem in raised.value.message
    assert "hunter2" not in str(raised.value)
    for fine in ("redis://h:6379/3", "redis://h:6379/", "redis://h", "postgresql://u@h/db"):
        if fine.split(":")[0] in url:
            load_config(env={variable: fine})


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml", env={})


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="frozen"):
        settings.runtime.timeout_ms = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:pa/ss@db.internal/prod",
        "postgresql://app:Pw?Secret@db.internal/prod",
        "postgresql://app:Pw#Secret@db.internal/prod",
    ],
)
def test_passwords_with_url_delimiters_are_refused_at_load_and_never_print(url: str) -> None:
    """A driver would take the password's '/', '?' or '#' for the end of the host and quote the
    rest in its error: refused when the configuration loads, naming the variable only."""
    with pytest.raises(ConfigError) as raised:
        load_config(env={"DITTO_WORKER_MEMORY_POSTGRES_URL": url})
    assert "DITTO_WORKER_MEMORY_POSTGRES_URL" in raised.value.message
    assert "percent-encode" in raised.value.message
    for part in ("pa/ss", "Pw", "Secret", "db.internal", "app"):
        assert part not in raised.value.message


def test_percent_encoded_passwords_load_and_never_print() -> None:
    from ditto.app.config import redact_url

    url = "postgresql://app:pa%2Fss%3FSecret%23@db.internal/prod"
    settings = load_config(env={"DITTO_WORKER_MEMORY_POSTGRES_URL": url})
    assert redact_url(settings.workers.memory.postgres_url) == "postgresql://***@db.internal/prod"


def test_an_unparsable_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(
            env={"DITTO_WORKER_MEMORY_POSTGRES_URL": "postgresql://app:Sup3r\uff03Secret@db/x"}
        )
    assert "Secret" not in str(raised.value)


def test_non_string_keys_are_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "? [a, b]\n: 1\n")
    with pytest.raises(ConfigError, match="plain strings"):
        load_config(path, env={})
