"""Engine options are declared once (issue 26, item 2): a field of the engine's option model in
core/engine_options.py, from which the engine's option check, the spec's model constructor, the
spec -> option map, the docs table and the language server's completion all derive."""

from __future__ import annotations

import importlib

import pytest

from auditlang.core.capabilities import ALL_KINDS
from auditlang.core.diagnostics import CompileError
from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.engine_options import EngineOptions, VLLMOptions, option
from auditlang.core.registry import REGISTRY, register
from auditlang.lsp.complete import complete
from auditlang.lsp.docs import registry_table
from auditlang.resolve import compile_spec
from auditlang.resolve import schema as S
from auditlang.resolve.models import ENGINE_OPTIONS, model_config


def test_every_engine_reads_its_options_from_its_option_model() -> None:
    table = registry_table("engine")
    for e in REGISTRY.entries("engine"):
        if e.schema is None:  # dryrun: accepts any option
            continue
        assert issubclass(e.schema, EngineOptions), e.name
        module = importlib.import_module(e.impl_path.partition(":")[0])  # imports no torch / vLLM
        assert module.KNOWN_OPTIONS == e.schema.known(), e.name
        for name in e.schema.model_fields:
            assert f"| `{e.name}` | `{name}` (" in table, (e.name, name)
        ctor = S.CONSTRUCTORS["model"][e.name]
        for param, opt in e.schema.spec_params().items():
            assert param in ctor.model_fields, (e.name, param)  # the spec parameter is the option's
            assert ENGINE_OPTIONS[e.name][param] == opt


def test_existing_spec_parameters_keep_their_defaults_and_limits() -> None:
    """Cells hash a model's parameters with their defaults: deriving them must not change them."""
    v = S.VLLMModel.model_fields
    assert (v["max_logprobs"].default, v["tensor_parallel"].default, v["prefix_caching"].default) == (None, 1, "auto")
    assert v["gpu_memory_utilization"].default is None and v["enforce_eager"].default is None
    o = S.OpenAIModel.model_fields
    assert (o["base_url"].default, o["endpoint"].default, o["server"].default) == (None, "auto", "generic")
    assert S.HFModel.model_fields["compile"].default is False and "compile" in S.EmbeddedModel.model_fields
    with pytest.raises(CompileError) as err:
        compile_spec("x.audit", text='model m = vllm("org/m", tensor_parallel=0)\n')
    assert any("tensor_parallel" in d.message for d in err.value.diagnostics)


class _WithDraft(VLLMOptions):
    draft_tokens: int | None = option(None, "speculative draft tokens per step (default: off)", fingerprint=None,
                                      spec="draft_tokens", ge=1)


def test_an_option_added_in_one_place_reaches_check_docs_editor_and_engine() -> None:
    """One new field in an engine's option model: the spec accepts it (limits and did-you-mean
    included), the editor completes it, the docs table lists it, the model's configuration sends
    it under the option's name and the engine's check accepts it."""
    ctor = S._with_engine_options("VLLMDraftModel", S._VLLMModel, _WithDraft)
    register("engine", "vllm_draft", impl="auditlang.engines.vllm_engine:VLLMEngine", schema=_WithDraft,
             capabilities=ALL_KINDS, install_hint="")
    S._STATIC_CONSTRUCTORS["model"]["vllm_draft"] = ctor
    try:
        assert ctor.model_fields["draft_tokens"].description.startswith("speculative draft tokens")
        assert "| `vllm_draft` | `draft_tokens` (none) | `draft_tokens` (none) | speculative draft tokens" in registry_table("engine")
        text = 'model m = vllm_draft("org/m", '
        assert "draft_tokens" in {i.label for i in complete(text, len(text), None)}
        with pytest.raises(CompileError) as err:
            compile_spec("x.audit", text='model m = vllm_draft("org/m", draft_tokns=4)\n')
        assert any("draft_tokens" in (d.hint or "") + d.message for d in err.value.diagnostics)
        with pytest.raises(CompileError):
            compile_spec("x.audit", text='model m = vllm_draft("org/m", draft_tokens=0)\n')
        spec = compile_spec("x.audit", text='model m = vllm_draft("org/m", draft_tokens=4)\n')
        cfg = model_config(spec, "m")
        assert cfg.options == {"draft_tokens": 4}
        _WithDraft.check_names(cfg)
        with pytest.raises(EngineError, match="unknown vllm option"):
            VLLMOptions.check_names(ModelConfig(name="m", engine="vllm", path="x", options={"draft_tokens": 4}))
    finally:
        S._STATIC_CONSTRUCTORS["model"].pop("vllm_draft", None)
        REGISTRY.unregister("engine", "vllm_draft")


def test_a_spec_default_is_what_the_engine_does_when_the_parameter_is_not_written() -> None:
    """resolve/models.py copies only written parameters into the options, so a spec default shown in
    hover and docs/engines.md must be the option's default, or None / "auto" (resolved by the one
    rule: $OPENAI_BASE_URL else OpenAI's API; prefix caching by the run's request kinds)."""
    from auditlang.core.engine_options import EngineOptions

    wrong = {}
    for cls in EngineOptions.__subclasses__():
        for sp, (_ann, f) in cls.spec_fields().items():
            option_default = cls.model_fields[cls.spec_params()[sp]].default
            if f.default not in (None, "auto") and f.default != option_default:
                wrong[f"{cls.ENGINE}.{sp}"] = (f.default, option_default)
    assert not wrong, wrong


def test_option_values_are_checked_against_the_limits_each_field_declares() -> None:
    """One value check (EngineOptions.check_values) reads each option's declared limits, so an option
    that allows 0 is not refused by a hand rule (vLLM once refused every number <= 0)."""
    from typing import ClassVar

    from auditlang.core.engine import EngineError
    from auditlang.core.engine_options import EngineOptions, VLLMOptions, option

    class _Opts(EngineOptions):
        ENGINE: ClassVar[str] = "toy"
        offset: int = option(0, "may be zero or negative", fingerprint=None)
        share: float = option(0.5, "a fraction", fingerprint=None, gt=0, le=1)

    _Opts.check_values("m", {"offset": 0, "share": 1.0})
    _Opts.check_values("m", {"offset": -3})
    for bad, words in (({"share": 0}, "must be > 0"), ({"share": 1.5}, "must be <= 1"), ({"offset": "x"}, "must be of type int"),
                       ({"offset": True}, "must be of type int")):
        with pytest.raises(EngineError, match=words):
            _Opts.check_values("m", bad)
    for bad, words in (({"tensor_parallel_size": 0}, ">= 1"), ({"gpu_memory_utilization": 1.2}, "<= 1"),
                       ({"kv_cache_gib": 0.0}, "> 0"), ({"max_num_seqs": 0}, ">= 1"), ({"max_logprobs": 0}, ">= 1")):
        with pytest.raises(EngineError, match=words):
            VLLMOptions.check_values("m", bad)
    VLLMOptions.check_values("m", {"tensor_parallel_size": 2, "gpu_memory_utilization": 1.0, "kv_cache_gib": 0.5})


def test_openai_option_values_go_through_the_one_check() -> None:
    """The openai engine's values are checked by EngineOptions.check_values against the limits and
    choices its fields declare (issue 37: no hand list of numbers and bounds in the engine)."""
    from auditlang.core.engine import EngineError, ModelConfig
    from auditlang.core.engine_options import OpenAIOptions
    from auditlang.engines.openai_engine import _Options

    def opts(**o):
        return _Options.parse(ModelConfig(name="m", engine="openai", path="x", options={"base_url": "http://127.0.0.1:9/v1", **o}))

    got = opts(retries=0, timeout=0.5, concurrency=1, window=1, endpoint="chat", server="vllm")
    assert (got.retries, got.timeout, got.concurrency, got.endpoint, got.server) == (0, 0.5, 1, "chat", "vllm")
    assert opts(base_url="http://h:1/v1/").base_url == "http://h:1/v1"
    for bad, words in (({"retries": -1}, "'retries' must be >= 0"), ({"timeout": 0}, "'timeout' must be > 0"),
                       ({"backoff": 0.0}, "'backoff' must be > 0"), ({"concurrency": 0}, "'concurrency' must be >= 1"),
                       ({"window": 0}, "'window' must be >= 1"), ({"concurrency": 2.5}, "must be of type int"),
                       ({"timeout": True}, "must be of type"), ({"endpoint": "chats"}, r"must be one of \['auto', 'chat', 'completions'\]"),
                       ({"server": "tgi"}, "must be one of"), ({"base_url": "ftp://h/v1"}, "must start with http"),
                       ({"api_key_env": 3}, "'api_key_env' must be of type str")):
        with pytest.raises(EngineError, match=words) as e:
            opts(**bad)
        assert e.value.hint, bad
    assert OpenAIOptions.choices("endpoint") == ("auto", "chat", "completions") and OpenAIOptions.choices("timeout") is None
