"""The one component registry: every protocol, evaluator, verbal parser, metric, comparison,
perturbation and engine, by kind and name, with its parameter schema and implementation.

An :class:`Entry` carries ``schema`` (what the language validates: one pydantic model for every
kind, an ``Obj`` subclass (the ``Params`` of a component's class, a metric's ``Params``, a
constructor model of ``resolve/schema.py``), or for an engine its option model
(``core/engine_options.py``), from which the model constructors' parameters derive) and ``impl`` (the object, or a ``"package.module:attr"`` string imported on
first :meth:`Entry.load`). Lazy strings keep the dependency direction: the resolver declares a
protocol without importing the planner-side program, and the engine table names torch- and
vLLM-backed classes without importing them.

Built-in entries are registered by the module that owns each kind (``resolve/schema.py`` for the
language constructors, ``metrics/registry.py``, ``evaluators/registry.py``,
``core/capabilities.py``). Code outside the package registers its own the same way::

    from auditlang.core.registry import register
    register("metric", "my_metric", schema=MyParams, impl=my_fn, doc="...")

This module imports nothing of auditlang outside ``core/``.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from importlib.metadata import entry_points
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.errors import AuditlangError

PLUGIN_GROUP = "auditlang.plugins"  # entry points: a callable that registers components when called
NO_PLUGINS_ENV = "AUDITLANG_NO_PLUGINS"  # set to 1 to ignore installed plugins

KINDS: tuple[str, ...] = ("protocol", "evaluator", "verbal_parser", "metric", "comparison", "perturbation", "engine")

# The module that registers each kind's built-in entries, imported by name on the first lookup
# of that kind, so a lookup never depends on which modules happen to be imported already. By name
# because they belong to later layers (resolve/, evaluators/, metrics/) that import this module.
BUILTINS: dict[str, str] = {
    "protocol": "auditlang.resolve.schema", "evaluator": "auditlang.evaluators.registry",
    "perturbation": "auditlang.prompts.perturb", "comparison": "auditlang.resolve.schema",
    "verbal_parser": "auditlang.evaluators.registry", "metric": "auditlang.metrics.registry",
    "engine": "auditlang.core.capabilities",
}


class RegistryError(AuditlangError, ValueError):
    """A registration that cannot be accepted, or a lookup of a name nobody registered.

    ``hint`` holds a did-you-mean suggestion and the registered names."""


@dataclass(frozen=True)
class Entry:
    """One registered component. ``meta`` holds kind-specific facts (a metric's ``inputs``, an
    engine's ``capabilities``, a perturbation's ``seed_name``)."""

    kind: str
    name: str
    schema: Any
    impl: Any
    doc: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    @property
    def impl_path(self) -> str | None:
        """``"module:attr"`` of a lazily referenced implementation, else None."""
        return self.impl if isinstance(self.impl, str) else None

    def load(self) -> Any:
        """The implementation object (imports a lazily referenced one now; ImportError propagates)."""
        if not isinstance(self.impl, str):
            return self.impl
        module, _, attr = self.impl.partition(":")
        obj: Any = importlib.import_module(module)  # lazy: a "module:attr" implementation, imported on first use
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


class Registry:
    """Entries by (kind, name). Registering a taken name raises unless ``replace=True``."""

    def __init__(self, kinds: tuple[str, ...] = KINDS, builtins: dict[str, str] | None = None) -> None:
        self.kinds = tuple(kinds)
        self._entries: dict[str, dict[str, Entry]] = {k: {} for k in self.kinds}
        self._aliases: dict[str, dict[str, str]] = {k: {} for k in self.kinds}
        self._pending: dict[str, str] = dict(builtins or {})  # kind -> module still to import
        self._plugins_pending = builtins is not None  # the process-wide registry loads installed plugins
        self._plugin: str | None = None  # "distribution version" while a plugin registers
        self._namespace: str | None = None  # the plugin's entry-point name while it registers
        self.plugins: dict[str, str] = {}  # distribution -> version of every loaded plugin
        self.shadowed: list[str] = []  # warnings: plugin names a built-in (or an earlier plugin) kept

    def register(self, kind: str, name: str, *, impl: Any, schema: Any = None, doc: str = "",
                 aliases: tuple[str, ...] = (), replace: bool = False, **meta: Any) -> Entry:
        """Add ``name`` to ``kind``. ``impl`` is the implementation or a ``"module:attr"`` string.
        Without ``schema``, a class's own ``Params`` (an evaluator's constructor model) is the
        schema and its ``DOC`` the doc: a component declares its parameters once.
        The built-ins of ``kind`` are loaded first, so a clash with one is reported here.

        While an installed plugin registers, its component is named ``<namespace>.<name>`` (the
        entry point's name, e.g. ``example.last_letter``) and also ``name`` unless a built-in or
        an earlier plugin has it: those keep the plain name, with a warning (``shadowed``), and
        a spec reaches the plugin's under the namespaced one."""
        self._load_builtins(kind)
        if schema is None and isinstance(impl, type):
            schema = getattr(impl, "Params", None)
            doc = doc or getattr(schema, "DOC", "")
        if self._namespace is not None and not replace:
            return self._register_from_plugin(kind, name, impl=impl, schema=schema, doc=doc, aliases=aliases, **meta)
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise RegistryError(f"register: a {kind} name must be an identifier, got {name!r}")
        if isinstance(impl, str):
            if ":" not in impl:
                raise RegistryError(f"register: {kind} {name!r}: a lazy implementation is 'module:attr', got {impl!r}")
        elif not callable(impl):
            raise RegistryError(f"register: {kind} {name!r}: the implementation is not callable")
        taken = self._entries[kind]
        if not replace and (name in taken or name in self._aliases[kind]):
            raise RegistryError(f"register: {kind} {name!r} is already registered", hint="pass replace=True to override")
        if not doc and not isinstance(impl, str):
            doc = (getattr(impl, "__doc__", None) or "").strip().split("\n")[0]
        if self._plugin is not None:
            meta = {**meta, "plugin": self._plugin}
        entry = Entry(kind, name, schema, impl, doc, dict(meta), tuple(aliases))
        taken[name] = entry
        for a in aliases:
            self._aliases[kind][a] = name
        return entry

    def _register_from_plugin(self, kind: str, name: str, **kw: Any) -> Entry:
        qualified = f"{self._namespace}.{name}"
        ns, self._namespace = self._namespace, None  # the two registrations below are plain ones
        try:
            entry = self.register(kind, qualified, **{**kw, "aliases": ()})
            if name in self._entries[kind] or name in self._aliases[kind]:
                owner = self._entries[kind].get(self._aliases[kind].get(name, name))
                who = f"plugin {owner.meta['plugin']}" if owner is not None and owner.meta.get("plugin") else "auditlang"
                self.shadowed.append(f"plugin {self._plugin}: {kind} '{name}' is also {who}'s, which keeps the name; "
                                     f"write '{qualified}' in a spec for the plugin's")
                return entry
            return self.register(kind, name, **kw)
        finally:
            self._namespace = ns

    def unregister(self, kind: str, name: str) -> None:
        """Remove an entry (tests and plugins that register temporarily)."""
        self._check_kind(kind)
        entry = self._entries[kind].pop(name, None)
        for a in entry.aliases if entry else ():
            self._aliases[kind].pop(a, None)

    def get(self, kind: str, name: str) -> Entry:
        """The entry registered as ``name`` (or one of its aliases); RegistryError with a
        did-you-mean hint otherwise."""
        found = self.find(kind, name)
        if found is None:
            raise RegistryError(f"unknown {kind.replace('_', ' ')} {name!r}", hint=self.suggest(kind, name))
        return found

    def find(self, kind: str, name: str) -> Entry | None:
        self._load(kind)
        entries = self._entries[kind]
        return entries.get(name) or entries.get(self._aliases[kind].get(name, ""))

    def names(self, kind: str) -> list[str]:
        """Registered names of ``kind``, in registration order (aliases excluded)."""
        self._load(kind)
        return list(self._entries[kind])

    def entries(self, kind: str) -> list[Entry]:
        self._load(kind)
        return list(self._entries[kind].values())

    def suggest(self, kind: str, name: str) -> str:
        """``did you mean 'x'? <kind>s: a, b, c`` (the closest registered name, if any)."""
        names = self.names(kind)
        close = difflib.get_close_matches(str(name), names + list(self._aliases[kind]), n=1)
        head = f"did you mean '{self._aliases[kind].get(close[0], close[0])}'? " if close else ""
        return head + f"{kind.replace('_', ' ')}s: " + ", ".join(sorted(names))

    def view(self, kind: str, value: Callable[[Entry], Any] | None = None) -> "KindView":
        """A live read-only mapping name -> ``value(entry)`` (default: the loaded implementation)."""
        self._check_kind(kind)
        return KindView(self, kind, value or Entry.load)

    def _load_builtins(self, kind: str) -> None:
        """Import the module registering ``kind``'s built-ins, once."""
        self._check_kind(kind)
        module = self._pending.pop(kind, None)
        if module is not None:
            importlib.import_module(module)  # lazy: the later layer that registers this kind's built-ins (BUILTINS)

    def _load(self, kind: str) -> None:
        """Before the first lookup: ``kind``'s built-ins, then, once per process, the installed
        plugins (registering never triggers plugins, so a plugin module can import auditlang)."""
        self._load_builtins(kind)
        if self._plugins_pending:  # every kind's built-ins first, so a plugin cannot shadow them unnoticed
            self._plugins_pending = False
            while self._pending:
                importlib.import_module(self._pending.pop(next(iter(self._pending))))  # lazy: as in _load_builtins
            self.load_plugins()

    def load_plugins(self) -> None:
        """Call every ``auditlang.plugins`` entry point of the installed distributions; what they
        register carries ``meta["plugin"] = "<distribution> <version>"`` (named in the checklist).
        ``AUDITLANG_NO_PLUGINS=1`` skips them."""
        if os.environ.get(NO_PLUGINS_ENV, "").strip() not in ("", "0"):
            return
        for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else ep.name
            version = ep.dist.version if ep.dist is not None else "?"
            self._plugin = f"{dist} {version}"
            self._namespace = re.sub(r"\W", "_", ep.name)
            seen = len(self.shadowed)
            try:
                hook = ep.load()
                if callable(hook):
                    hook()
            except RegistryError:
                raise
            except Exception as e:  # noqa: BLE001  (a broken plugin must not look like an auditlang bug)
                raise RegistryError(f"plugin {dist} {version} ({ep.value}) failed to load: {type(e).__name__}: {e}",
                                    hint=f"fix or uninstall it; {NO_PLUGINS_ENV}=1 runs without plugins") from None
            finally:
                self._plugin = self._namespace = None
            self.plugins[dist] = version
            for line in self.shadowed[seen:]:
                print(f"warning: {line}", file=sys.stderr)

    def _check_kind(self, kind: str) -> None:
        if kind not in self._entries:
            raise RegistryError(f"unknown component kind {kind!r}", hint="kinds: " + ", ".join(self.kinds))


class KindView(Mapping):
    """Read-only mapping over one kind of a :class:`Registry`; reflects later registrations.
    Aliases are looked up but not listed."""

    def __init__(self, registry: Registry, kind: str, value: Callable[[Entry], Any]) -> None:
        self._registry, self._kind, self._value = registry, kind, value

    def __getitem__(self, name: str) -> Any:
        entry = self._registry.find(self._kind, name) if isinstance(name, str) else None
        if entry is None:
            raise KeyError(name)
        return self._value(entry)

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry.names(self._kind))

    def __len__(self) -> int:
        return len(self._registry.names(self._kind))

    def __repr__(self) -> str:
        return f"<{self._kind} registry: {', '.join(self)}>"


REGISTRY = Registry(builtins=BUILTINS)


def register(kind: str, name: str, *, impl: Any, schema: Any = None, doc: str = "", aliases: tuple[str, ...] = (),
             replace: bool = False, **meta: Any) -> Entry:
    """Register a component in the process-wide registry (see :meth:`Registry.register`)."""
    return REGISTRY.register(kind, name, impl=impl, schema=schema, doc=doc, aliases=aliases, replace=replace, **meta)


def get(kind: str, name: str) -> Entry:
    return REGISTRY.get(kind, name)


def names(kind: str) -> list[str]:
    return REGISTRY.names(kind)


def missing_plugin_note(kind: str, name: str) -> str:
    """Hint for a name no registered component has: it may come from a plugin that is not
    installed here, or that ``AUDITLANG_NO_PLUGINS`` turned off (installed ones are named)."""
    if os.environ.get(NO_PLUGINS_ENV, "").strip() not in ("", "0"):
        dists = sorted({f"{ep.dist.name} {ep.dist.version}" for ep in entry_points(group=PLUGIN_GROUP)
                        if ep.dist is not None})
        return (f"if {kind} '{name}' comes from a plugin: plugins are turned off ({NO_PLUGINS_ENV} is set)"
                + (f"; installed: {', '.join(dists)}" if dists else ""))
    return f"if {kind} '{name}' comes from a plugin, that plugin is not installed here (docs/plugins.md)"
