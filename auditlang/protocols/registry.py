"""Protocol programs by constructor name (the component registry's ``protocol`` entries), and
:func:`program_for`."""

from __future__ import annotations

from collections.abc import Mapping

from auditlang.core.registry import REGISTRY
from auditlang.protocols.base import Program

PROGRAMS: Mapping[str, type[Program]] = REGISTRY.view("protocol")


def program_for(obj, spec) -> Program:
    """The program of one resolved protocol object. A program that wraps another protocol
    (``platt(base=...)``) gets that protocol's program built here."""
    cls = PROGRAMS[obj.ctor]
    wraps = getattr(cls, "wraps_param", None)
    if wraps:
        return cls(obj, spec, base=program_for(spec.get(getattr(obj.value, wraps)), spec))
    return cls(obj, spec)
