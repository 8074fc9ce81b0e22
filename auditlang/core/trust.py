"""What the user allows a run to contact and read (docs/security.md): the allowances, the
loopback rule, the ``*_API_KEY`` convention, and the guard engines consult before connecting.

Kept in ``core`` so engines can ask without importing the execution layer; the command line and
the user config file are read by :mod:`auditlang.execute.access`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

SECRET_CONVENTION = re.compile(r"^[A-Z][A-Z0-9_]*_API_KEY$")


@dataclass
class Allowances:
    """Hosts and secret names the user allows (outside the spec), and where each came from."""

    hosts: dict[str, str] = field(default_factory=dict)  # host -> "--allow-host" or the config file path
    secrets: dict[str, str] = field(default_factory=dict)

    def host_ok(self, host: str) -> str | None:
        """Why ``host`` may be contacted, or None."""
        if is_loopback(host):
            return "loopback"
        return self.hosts.get(host.lower())

    def secret_ok(self, name: str) -> str | None:
        if name in self.secrets:
            return self.secrets[name]
        if SECRET_CONVENTION.match(name):
            return "the *_API_KEY convention"
        return None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- defence in depth: the engine asks before it connects (set by `auditc run`; None = library use)
_ACTIVE: Allowances | None = None


def enforce(allow: Allowances | None) -> None:
    global _ACTIVE
    _ACTIVE = allow


def permitted(url: str, secret: str | None) -> str | None:
    """Why an engine may not contact ``url`` with ``secret`` under the active allowances, else None."""
    if _ACTIVE is None:
        return None
    host = (urlsplit(url).hostname or "").lower()
    if _ACTIVE.host_ok(host) is None:
        return f"host {host!r} is not allowed (--allow-host {host})"
    if secret and _ACTIVE.secret_ok(secret) is None:
        return f"secret {secret} is not allowed (--allow-secret {secret})"
    return None
