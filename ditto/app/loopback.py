"""Whether a listening address is reachable from this machine only (the MCP server and
``ditto ui`` refuse other addresses without a token)."""

from __future__ import annotations

__all__ = ("is_loopback",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to any address
