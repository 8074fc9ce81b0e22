"""The cyclic garbage collector paused while an engine imports its stack (issue 36, session 21).

Importing vLLM's stack (torch with dynamo and inductor, sympy, transformers, vLLM's entrypoint:
about 6,000 modules) allocates millions of objects that all survive, and CPython's collector
runs a pass every 700 allocations over the youngest of them and, as they age, over all of them:
on the H200 machine and here that was about 17 % of the imports' CPU time. Nothing those imports
allocate is garbage worth collecting, so :func:`gc_paused` turns the collector off for the
imports and back on (as it was) afterwards; results cannot change, only when memory is reclaimed.
It is never held across a fork (vLLM's engine core would inherit a disabled collector).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after if it was enabled."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
