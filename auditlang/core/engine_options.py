"""Engine options, declared once per engine: one field of the engine's option model each.

An engine option (``ModelConfig.options``: vLLM's ``max_logprobs``, hf's ``compile``, ...) is a
field of its engine's :class:`EngineOptions` subclass below, written with :func:`option`: its
type, its engine default and its one-line doc. Everything else derives from that field:

* the engine's option check (``check_config``: unknown names, with every known option and its
  doc in the hint; vLLM's type checks) and its defaults (``engines/hf.py``, ``vllm_engine.py``,
  ``openai_engine.py`` read :meth:`EngineOptions.known` and :meth:`EngineOptions.defaults`);
* with ``spec=``, a parameter of the spec's model constructor (``vllm(..., tensor_parallel=2)``):
  ``resolve/schema.py`` builds ``hf(...)``, ``vllm(...)``, ``openai(...)`` and ``embedded(...)``
  from :meth:`EngineOptions.spec_fields`, so the resolver checks it (with "did you mean" hints),
  the language server completes and documents it, and ``resolve/models.py`` sends it to the engine
  under the option's name when the spec writes it;
* the options table of docs/engines.md (``scripts/registry_docs.py``, checked by a test).

They are registered as the engine entries' ``schema`` (``core/capabilities.py``) and live here,
in ``core/``, because the resolver must read them without importing any engine (torch, vLLM).

Imports nothing of auditlang outside ``core/``.
"""

from __future__ import annotations

import operator as op
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from auditlang.core.engine import EngineError, ModelConfig

_UNSET: Any = object()


@dataclass(frozen=True)
class SpecParam:
    """How the spec writes an option, where it differs from the option itself: the parameter's
    ``name``, its ``annotation`` and ``default`` (the spec's own: none or "auto" where the engine's
    default applies), limits (``ge=1``, ...) and ``doc``. Unset parts are the option's."""

    name: str
    annotation: Any = _UNSET
    default: Any = _UNSET
    doc: str = ""
    limits: dict[str, Any] = field(default_factory=dict)


def option(default: Any, doc: str, *, fingerprint: str | None, spec: str | SpecParam | None = None,
           **limits: Any) -> Any:
    """An engine option's field: its engine ``default``, its ``doc`` (shown in errors, the docs
    table and the editor), pydantic ``limits`` (``ge=1``, ...), ``spec``: the spec parameter
    that sets it (a name, or a :class:`SpecParam`), or None when only the Python API sets it, and
    ``fingerprint`` (required, so every option says it): the key under which the engine's
    fingerprint records the option's effect when it can change results (the journal's results are
    keyed by the fingerprint, so a changed value is a new cache key and a new checklist line), or
    None for an option that cannot change a result (memory, concurrency, retries)."""
    if isinstance(spec, str):
        spec = SpecParam(spec)
    return Field(default, description=doc, json_schema_extra={"spec": spec, "fingerprint": fingerprint}, **limits)


class EngineOptions(BaseModel):
    """One engine's options (a subclass per engine). ``ENGINE`` names the engine in messages."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    ENGINE: ClassVar[str] = ""

    @classmethod
    def known(cls) -> dict[str, str]:
        """Option name -> its doc, in declaration order."""
        return {n: f.description or "" for n, f in cls.model_fields.items()}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Option name -> the engine's default."""
        return {n: f.default for n, f in cls.model_fields.items()}

    @classmethod
    def check_names(cls, config: ModelConfig) -> None:
        """EngineError for options this engine does not have, naming every known one."""
        unknown = set(config.options) - set(cls.model_fields)
        if unknown:
            known = "; ".join(f"{k}: {v}" for k, v in cls.known().items())
            raise EngineError(f"model {config.name!r}: unknown {cls.ENGINE} option(s) {sorted(unknown)}",
                              hint=f"known options: {known}")

    @classmethod
    def check_values(cls, model: str, opts: Mapping[str, Any]) -> None:
        """EngineError for an option value of the wrong type or outside the limits its field
        declares (``ge``, ``gt``, ``le``, ``lt``): the one value check every engine uses."""
        tests = {"ge": (op.ge, ">="), "gt": (op.gt, ">"), "le": (op.le, "<="), "lt": (op.lt, "<")}
        for k, v in opts.items():
            kinds = cls.python_types(k)
            if not isinstance(v, kinds) or (bool not in kinds and isinstance(v, bool)):
                want = " or ".join(t.__name__ for t in kinds)
                raise EngineError(f"model {model!r}: {cls.ENGINE} option {k!r} must be of type {want} (got {v!r})",
                                  hint=f"{k}: {cls.model_fields[k].description}")
            allowed = cls.choices(k)
            if allowed is not None and v is not None and v not in allowed:
                raise EngineError(f"model {model!r}: {cls.ENGINE} option {k!r} must be one of {list(allowed)} (got {v!r})",
                                  hint=f"{k}: {cls.model_fields[k].description}")
            for m in cls.model_fields[k].metadata:
                for name, (test, sign) in tests.items():
                    limit = getattr(m, name, None)
                    if limit is not None and v is not None and not isinstance(v, bool) and not test(v, limit):
                        raise EngineError(f"model {model!r}: {cls.ENGINE} option {k!r} must be {sign} {limit} (got {v!r})",
                                          hint=f"{k}: {cls.model_fields[k].description}")

    @classmethod
    def choices(cls, name: str) -> tuple[Any, ...] | None:
        """The values an option whose type is a ``Literal`` (or an optional one) may take; None for
        any other type."""
        ann = cls.model_fields[name].annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
        args = tuple(a for a in args if a is not type(None))
        if not args or any(typing.get_origin(a) is not Literal for a in args):
            return None
        return tuple(x for a in args for x in typing.get_args(a))

    @classmethod
    def python_types(cls, name: str) -> tuple[type, ...]:
        """The Python types an option's value may have (``float`` options take ints too)."""
        ann = cls.model_fields[name].annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
        out: list[type] = []
        for a in args:
            if a is type(None):
                continue
            if typing.get_origin(a) is Literal:
                out += sorted({type(x) for x in typing.get_args(a)}, key=lambda t: t.__name__)
            else:
                out += [int, float] if a is float else [typing.get_origin(a) or a]
        return tuple(dict.fromkeys(out))

    @classmethod
    def spec_params(cls) -> dict[str, str]:
        """Spec parameter -> option name, for the options a spec can write."""
        return {s.name: n for n, s in cls._specs().items()}

    @classmethod
    def spec_fields(cls) -> dict[str, tuple[Any, FieldInfo]]:
        """The model constructor's parameters for these options (``pydantic.create_model`` fields)."""
        out = {}
        for n, s in cls._specs().items():
            f = cls.model_fields[n]
            limits = s.limits or {k: getattr(m, k) for m in f.metadata for k in ("ge", "gt", "le", "lt") if hasattr(m, k)}
            out[s.name] = (f.annotation if s.annotation is _UNSET else s.annotation,
                           Field(f.default if s.default is _UNSET else s.default, description=s.doc or f.description,
                                 **limits))
        return out

    @classmethod
    def fingerprint_keys(cls) -> dict[str, str | None]:
        """Option name -> its fingerprint key (None: the option cannot change a result)."""
        return {n: (f.json_schema_extra or {}).get("fingerprint") if isinstance(f.json_schema_extra, dict) else None
                for n, f in cls.model_fields.items()}

    @classmethod
    def _specs(cls) -> dict[str, SpecParam]:
        return {n: f.json_schema_extra["spec"] for n, f in cls.model_fields.items()
                if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("spec")}


CHAT_TEMPLATE_DOC = ("extra chat-template variables, e.g. {'enable_thinking': False} (model params enable_thinking, "
                     "reasoning_effort)")


class HFOptions(EngineOptions):
    """The ``hf`` engine (transformers)."""

    ENGINE: ClassVar[str] = "hf"
    attn_implementation: str | None = option(
        None, "transformers attention backend, e.g. 'sdpa' or 'eager' (default: transformers' choice)", fingerprint="attn_implementation")
    trust_remote_code: bool = option(False, "allow model code from the checkpoint (default false)", fingerprint=None)
    logits_budget: int = option(1 << 28, "max float32 logit values held at once per forward (default 2**28 = 1 GiB)", fingerprint=None)
    cpu_linear: str = option("onednn", "CPU float32 linear layers: 'onednn' (pre-packed oneDNN weights, default where "
                                       "available) or 'torch' (stock MKL)", fingerprint="cpu_linear")
    chat_template_kwargs: dict[str, Any] | None = option(None, CHAT_TEMPLATE_DOC, fingerprint="chat_template_kwargs")
    compile: bool = option(False, "torch.compile the scoring forward passes (choice, continuation and hidden-state "
                                  "requests; dynamic shapes, compiled once per load; generation stays eager; default false)",
                           spec=SpecParam("compile", doc="torch.compile(dynamic=True) of the scoring forward passes "
                                                         "(docs/engines.md: compile); the first batches pay the compile, "
                                                         "so it pays off on large scoring audits on a GPU"), fingerprint="compile")


class VLLMOptions(EngineOptions):
    """The ``vllm`` engine (vLLM's offline engine)."""

    ENGINE: ClassVar[str] = "vllm"
    max_logprobs: int = option(256, "largest top-k window / number of label ids a request may ask for (default 256)",
                               spec=SpecParam("max_logprobs", int | None, None, limits={"ge": 1}), fingerprint=None, ge=1)
    max_model_len: int | None = option(None, "context length in tokens (default: the model's)", fingerprint="max_model_len", ge=1)
    kv_cache_gib: float | None = option(
        None, "KV-cache size in GiB (default 1 on CPU; on GPU vLLM sizes it from gpu_memory_utilization)", fingerprint=None, gt=0)
    gpu_memory_utilization: float | None = option(None, "fraction of GPU memory vLLM may use (default vLLM's 0.92)",
                                                  spec="gpu_memory_utilization", gt=0, le=1, fingerprint=None)
    enforce_eager: bool | None = option(None, "disable torch.compile / CUDA graphs (unset: true on CPU; on a GPU true when auditc run's "
                                        "estimated GPU time for the model is under 240 s, else false)",
                                        spec="enforce_eager", fingerprint="enforce_eager")
    tensor_parallel_size: int = option(1, "GPUs per model (default 1)", spec="tensor_parallel", ge=1, fingerprint="tensor_parallel_size")
    max_num_seqs: int | None = option(None, "sequences scheduled at once (default vLLM's)", fingerprint=None, ge=1)
    threads_bind: str | None = option(
        None, "CPU only: VLLM_CPU_OMP_THREADS_BIND, e.g. '0-7' (default: every core this process may use)", fingerprint=None)
    in_process: bool | None = option(
        None, "run vLLM's engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0; default true on CPU)",
        spec="in_process", fingerprint=None)
    chunk_size: int | None = option(None, "most requests in vLLM at once, topped up as they finish (default: every "
                                          "request of a stage; results are committed as they finish either way)", fingerprint=None, ge=1)
    enable_prefix_caching: bool = option(
        False, "vLLM's automatic prefix caching: one prefill of a prompt serves all its requests "
               "(default false; `auditc run` resolves the spec's prefix_caching=auto: true)",
        spec=SpecParam("prefix_caching", bool | Literal["auto"], "auto",
                       doc="vLLM's automatic prefix caching: one prefill of a prompt serves its greedy answer and every "
                           "sample. auto (= on) is resolved by `auditc run`; prompt-logprob requests stay exact with it "
                           "on (vLLM reads no cached block for them, checked per request; docs/engines.md)"), fingerprint="prefix_caching")
    trust_remote_code: bool = option(False, "allow model code from the checkpoint (default false)", fingerprint=None)
    chat_template_kwargs: dict[str, Any] | None = option(None, CHAT_TEMPLATE_DOC, fingerprint="chat_template_kwargs")


OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"  # the server of an openai model that names no base_url
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def openai_base_url(options: Mapping[str, Any]) -> tuple[str, str]:
    """The one rule for the server an openai model contacts, and where its URL comes from: the
    ``base_url`` option (``"declared"``), else ``$OPENAI_BASE_URL`` (``"environment"``), else
    OpenAI's API (``"default"``). ``resolve/models.py`` records it in the model's configuration,
    ``execute/access.py`` checks it against the allowed hosts, the engine connects to it."""
    if options.get("base_url"):
        return str(options["base_url"]), "declared"
    if os.environ.get(OPENAI_BASE_URL_ENV):
        return os.environ[OPENAI_BASE_URL_ENV], "environment"
    return OPENAI_DEFAULT_URL, "default"


class OpenAIOptions(EngineOptions):
    """The ``openai`` engine (any OpenAI-compatible server)."""

    ENGINE: ClassVar[str] = "openai"
    base_url: str | None = option(None, f"server URL up to /v1 (default ${OPENAI_BASE_URL_ENV} or {OPENAI_DEFAULT_URL})",
                                  spec=SpecParam("base_url", str | None, None), fingerprint="base_url")
    api_key_env: str | None = option(
        "OPENAI_API_KEY", "name of the environment variable holding the API key (default OPENAI_API_KEY; unset = no key)",
        spec="api_key_env", fingerprint=None)
    endpoint: Literal["auto", "chat", "completions"] = option(
        "auto", "'auto' (messages -> chat, text -> completions), 'chat' or 'completions' (default auto)",
        spec=SpecParam("endpoint", Literal["auto", "chat", "completions"], "auto"), fingerprint="endpoint")
    server: Literal["generic", "vllm"] = option(
        "generic", "'generic' or 'vllm' (enables vLLM's tokenize/echo/structured-output extensions; default generic)",
        spec=SpecParam("server", doc="vllm: echo + /tokenize give teacher forcing and constrained choice"), fingerprint="server")
    timeout: float = option(120.0, "seconds per HTTP request (default 120); a request that times out on every try "
                                   "is a counted request error", spec="timeout", fingerprint=None, gt=0)
    retries: int = option(3, "retries after a connection error, timeout, 429 or 5xx (default 3)", spec="retries", fingerprint=None, ge=0)
    backoff: float = option(1.0, "first retry delay in seconds, doubled each retry (default 1.0)", fingerprint=None, gt=0)
    concurrency: int = option(4, "requests in flight at once (default 4)", fingerprint=None, ge=1)
    window: int = option(20, "top_logprobs window asked for choice_logprobs (default 20 = OpenAI's cap)", fingerprint="window", ge=1)
    chat_template_kwargs: dict[str, Any] | None = option(
        None, "chat-template variables (model params enable_thinking, reasoning_effort): sent as chat_template_kwargs "
              "(vLLM-style servers), reasoning_effort as the top-level API parameter", fingerprint="chat_template_kwargs")
