"""The resolved spec: every declared object validated and addressed by a canonical id."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.core.diagnostics import Span
from auditlang.resolve.schema import Obj
from auditlang.resolve.schema import Settings


@dataclass(frozen=True)
class Resolved:
    """One declared (or inline) object after validation."""

    id: str  # canonical id: "name" in the entry spec, "<module>.name" for imported objects
    kind: str  # dataset | model | template | ...
    ctor: str  # constructor name, e.g. "jsonl", "token_prob"
    value: Obj  # the validated pydantic model
    span: Span
    param_spans: tuple[tuple[str, Span], ...] = ()

    def param_span(self, name: str) -> Span:
        return dict(self.param_spans).get(name, self.span)

    def params(self) -> dict[str, Any]:
        return self.value.model_dump(by_alias=True, exclude_none=False)


@dataclass(frozen=True)
class MetricRef:
    """A metric named in a spec with its parameters, e.g. ``ece(bins=10, binning=equal_width)``."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v}" for k, v in self.params) + ")"


@dataclass
class Spec:
    entry: Path
    root: Path
    objects: dict[str, Resolved] = field(default_factory=dict)
    metrics: dict[str, MetricRef] = field(default_factory=dict)  # object id -> metric
    report: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 of the source text
    warnings: list[Any] = field(default_factory=list)
    entry_text: str | None = None  # the entry's source when it was compiled from text, not read from disk
    model_swaps: dict[str, str] = field(default_factory=dict)  # --swap-model NAME -> model expression
    model_args: list[dict[str, str]] = field(default_factory=list)  # -M / --model-args as given (resolve/overrides.py)
    model_overrides: list[dict[str, str]] = field(default_factory=list)  # what each changed: model, key, from, to, arg

    def of_kind(self, kind: str) -> dict[str, Resolved]:
        return {k: v for k, v in self.objects.items() if v.kind == kind}

    def get(self, oid: str) -> Resolved:
        return self.objects[oid]

    def judge_models(self, audits=None) -> list[str]:
        """Judge models of the LLM-judge evaluators of ``audits`` (all audits by default), in order."""
        ids = list(self.of_kind("audit")) if audits is None else list(audits)
        out = [self.get(e).value.judge for a in ids for e in self.get(a).value.evaluators
               if e in self.objects and getattr(self.get(e).value, "judge", None)]
        return list(dict.fromkeys(out))

    @property
    def settings(self):

        s = [o for o in self.objects.values() if o.kind == "settings"]
        return s[0].value if s else Settings()

    def seed(self, own: int | None) -> int:
        """The one seed rule: an object's own seed (a model's, a perturbation's, a variant's
        ``fewshot_seed``, a protocol's), else the settings seed."""
        return own if own is not None else self.settings.seed
