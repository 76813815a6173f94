"""What is wrong with a service URL (``postgresql://…``, ``mysql://…``, ``redis://…``), said
without quoting it: a URL may carry a password, and the parsers' and drivers' own messages
quote the URL whole (``urlsplit`` on a bad port or bracket, asyncpg on a non-numeric port)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ("split_schema", "url_problem")


def url_problem(text: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``text`` is not a usable URL of one of ``schemes``, or ``None`` when it is.

    Args:
        text: The URL (never echoed).
        schemes: The schemes accepted (``("postgresql", "postgres")``).

    Returns:
        The problem, in words naming no part of the URL.
    """
    # Drivers end the host part at the first '/', '?' or '#': one of those inside a password
    # would make them connect elsewhere and print the rest of the password in their error.
    start = text.find("://") + 3
    ends = [i for i in (text.find(mark, start) for mark in "/?#") if i >= 0]
    end = min(ends, default=len(text))
    if start >= 3 and "@" not in text[start:end] and "@" in text[end:]:
        return (
            "the user name or password holds an unencoded '/', '?' or '#' "
            "(percent-encode them: %2F, %3F, %23)"
        )
    wanted = f"a URL with scheme {' or '.join(schemes)}"
    try:
        parts = urlsplit(text)
    except ValueError:  # an unclosed '[' of an IPv6 host
        return f"must be {wanted}: its host is not a valid name or address"
    if parts.scheme not in schemes or not (parts.hostname or parts.path):
        return f"must be {wanted}"
    try:
        _ = parts.port
    except ValueError:
        return "its port must be a number from 0 to 65535"
    database = parts.path.strip("/")
    if parts.scheme in ("redis", "rediss") and database and not database.isdigit():
        # redis-py ignores a database it cannot read as a number and uses database 0.
        return "its database (the path after the port) must be a number, e.g. /0"
    return None


def split_schema(url: str) -> tuple[str, str | None]:
    """A PostgreSQL URL without its ``schema`` query parameter (asyncpg would send it to the
    server as a setting, which refuses it), and that parameter (``None`` when absent).

    Raises:
        ValueError: The URL does not parse, or names more than one schema (the message never
            quotes the URL).
    """
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # urlsplit's message quotes the URL
        raise ValueError("not a valid URL") from None
    schemas = [value for name, value in query if name == "schema"]
    if len(schemas) > 1:
        raise ValueError("give one schema")
    if schemas and not schemas[0]:
        raise ValueError("its schema parameter is empty")
    rest = urlencode([(name, value) for name, value in query if name != "schema"])
    return urlunsplit(parts._replace(query=rest)), (schemas[0] if schemas else None)
