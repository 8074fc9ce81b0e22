"""What the user allows a run to contact and read (docs/security.md): the allowances, the
loopback rule, and the guard engines consult before connecting. Every secret needs the user's
own consent (``--allow-secret NAME`` or the config file); a variable that is not set sends
nothing and needs none.

Kept in ``core`` so engines can ask without importing the execution layer; the command line and
the user config file are read by :mod:`auditlang.execute.access`.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

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
        """Who allowed the environment variable ``name`` to be read and sent, or None: only the
        user, by name (a spec naming ``LAB_API_KEY`` gets nothing by convention)."""
        return self.secrets.get(name)


def secret_set(name: str | None) -> bool:
    """Whether the environment variable ``name`` holds a value (an unset one sends nothing)."""
    return bool(name) and bool(os.environ.get(name or ""))


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
    if secret and secret_set(secret) and _ACTIVE.secret_ok(secret) is None:
        return f"secret {secret} is not allowed (--allow-secret {secret})"
    return None
