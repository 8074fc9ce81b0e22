"""The one component registry (issue 13): every constructor the language accepts has an
implementation and every implementation a constructor; schemas agree with implementations;
a component registered from outside the package is a constructor for `auditc check`."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import typing
from pathlib import Path

import pytest

from auditlang.evaluators.string_match import Extract
from auditlang.core.diagnostics import CompileError
from auditlang.resolve import compile_spec

from auditlang.cli import main
from auditlang.core.params import Obj
from auditlang.core.registry import KINDS, REGISTRY, Registry, RegistryError, register
from auditlang.evaluators.base import Evaluator, VerbalParser
from auditlang.protocols.base import Program
from auditlang.resolve import schema as S


def _subclasses(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def _public_classes(base: type, package: str, modules: list[str]) -> set[type]:
    for m in modules:
        importlib.import_module(f"{package}.{m}")
    return {c for c in _subclasses(base) if c.__module__.startswith(package + ".") and not c.__name__.startswith("_")
            and not inspect.isabstract(c) and ("name" in vars(c) or base is Program)}


def _impls(kind: str) -> set:
    return {e.load() for e in REGISTRY.entries(kind)}


def test_every_kind_is_populated_and_every_implementation_loads() -> None:
    import auditlang.evaluators  # noqa: F401  (verbal parsers)
    import auditlang.metrics  # noqa: F401  (metrics)

    for kind in KINDS:
        entries = REGISTRY.entries(kind)
        assert entries, kind
        for e in entries:
            if kind == "engine":  # engine modules import torch / vLLM: check they exist, do not import them
                module = e.impl_path.partition(":")[0]
                assert importlib.util.find_spec(module) is not None, e
            else:
                assert callable(e.load()), e


def test_language_constructors_are_the_registry_entries() -> None:
    for lang, kind in S.REGISTRY_KINDS.items():
        ctors = S.CONSTRUCTORS[lang]
        assert list(ctors) == REGISTRY.names(kind)
        for name, cls in ctors.items():
            assert issubclass(cls, S.Obj) and REGISTRY.get(kind, name).schema is cls


def test_every_protocol_program_has_a_constructor_and_vice_versa() -> None:
    programs = _public_classes(Program, "auditlang.protocols", ["token", "verbal", "consistency", "probes"])
    assert _impls("protocol") == programs
    for e in REGISTRY.entries("protocol"):
        # the resolver knows which protocols are fitted on the dev split without importing them
        assert bool(e.meta.get("fitted")) == e.load().needs_dev, e.name


def test_every_evaluator_and_verbal_parser_has_an_entry_and_vice_versa() -> None:
    mods = ["letters", "regex_reparse", "constrained", "string_match", "judge", "boxed", "verbal", "linguistic"]
    assert _impls("evaluator") == _public_classes(Evaluator, "auditlang.evaluators", mods)
    assert _impls("verbal_parser") == _public_classes(VerbalParser, "auditlang.evaluators", mods)
    for e in REGISTRY.entries("evaluator") + REGISTRY.entries("verbal_parser"):
        assert e.load().name == e.name
    for e in REGISTRY.entries("evaluator"):  # what the resolver (E153) and the planner read
        assert e.meta["reads"] in ("labels", "text"), e.name
        assert ("followup" in e.meta) == (e.name in ("constrained", "llm_judge")), e.name


def test_verbal_scales_are_the_registered_parsers() -> None:
    import auditlang.evaluators  # noqa: F401

    assert set(typing.get_args(S.VerbalScale)) == set(REGISTRY.names("verbal_parser"))


def test_evaluator_schemas_agree_with_the_scorers() -> None:
    """Every value the language accepts for an evaluator parameter builds the scorer (through
    the same mapping the scoring stage uses)."""
    from auditlang.evaluators.build import make_evaluator

    for e in REGISTRY.entries("evaluator"):
        if e.name == "llm_judge":  # needs a judge model of a spec; its parameters are max_tokens and judge
            continue
        defaults = {k: v for k, v in e.schema().model_dump(by_alias=True).items()}
        make_evaluator(None, "x", "multiple_choice", ctor=e.name, params=defaults)
        for fname, field in e.schema.model_fields.items():
            for choice in typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ():
                try:
                    make_evaluator(None, "x", "multiple_choice", ctor=e.name, params={**defaults, fname: choice})
                except ValueError:
                    # a combination the scorer refuses must be one `auditc check` refuses (E159)
                    value = choice if isinstance(choice, str) and choice.isidentifier() else repr(choice)
                    with pytest.raises(CompileError) as err:
                        compile_spec("x.audit", text=f"evaluator x = {e.name}({fname}={value})\n")
                    assert any(d.code == "E159" for d in err.value.diagnostics), (e.name, fname, choice)


def test_every_comparison_function_has_a_constructor_and_vice_versa() -> None:
    import auditlang.report.comparisons as C

    found = set()
    for f in Path(C.__file__).parent.glob("*.py"):
        mod = importlib.import_module(f"auditlang.report.comparisons.{f.stem}")
        for name, fn in vars(mod).items():
            if (inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not name.startswith("_")
                    and list(inspect.signature(fn).parameters) == ["rd", "name", "c"]):
                found.add(fn)
    assert _impls("comparison") == found


def test_every_perturbation_class_has_a_constructor_and_vice_versa() -> None:
    import auditlang.prompts.perturb as P

    found = {c for c in _subclasses(P.Perturbation) if c.__module__ == P.__name__ and not c.__name__.startswith("_")}
    assert _impls("perturbation") == found
    for e in REGISTRY.entries("perturbation"):  # the class's Params is the schema: declared once
        assert e.schema is e.load().Params and e.name == e.load().name, e.name
    # one_shot's schema admits exactly the banks and indices the implementation has
    params = P.OneShot.Params
    assert set(typing.get_args(typing.get_args(params.model_fields["bank"].annotation)[0])) == set(P.ONESHOT_EXAMPLES)
    le = next(m.le for m in params.model_fields["index"].metadata if hasattr(m, "le"))
    assert all(len(bank) == le + 1 for bank in P.ONESHOT_EXAMPLES.values())


def test_every_model_constructor_runs_on_a_registered_engine() -> None:
    engines = set(REGISTRY.names("engine"))
    assert {"hf", "vllm", "openai"} <= engines
    embedded = typing.get_args(S.EmbeddedModel.model_fields["engine"].annotation)
    assert set(embedded) <= engines
    assert {c for c in S.CONSTRUCTORS["model"] if c != "embedded"} <= engines


def test_metric_schemas_name_real_keyword_parameters_with_the_same_defaults() -> None:
    """A metric's ``Params`` is the one declaration of its parameters: each is a keyword of the
    function, and where the function has a default it is the declared one (a notebook call and a
    spec call compute the same number)."""
    for e in REGISTRY.entries("metric"):
        assert isinstance(e.schema, type) and issubclass(e.schema, Obj), e.name
        params = inspect.signature(e.load()).parameters
        for pname, f in e.schema.model_fields.items():
            assert pname in params, (e.name, pname)
            default = params[pname].default
            if default is not inspect.Parameter.empty and not f.is_required():
                assert default == f.default, (e.name, pname, default, f.default)


# ----------------------------------------------------------------------------- the Registry itself


def test_registry_lookup_suggestions_aliases_and_lazy_loading() -> None:
    r = Registry()
    r.register("perturbation", "space_insertion", impl="auditlang.prompts.perturb:insert_space", aliases=("space",))
    with pytest.raises(RegistryError, match="already registered"):
        r.register("perturbation", "space_insertion", impl=len)
    with pytest.raises(RegistryError, match="already registered"):
        r.register("perturbation", "space", impl=len)
    with pytest.raises(RegistryError, match="identifier"):
        r.register("metric", "bad name", impl=len)
    with pytest.raises(RegistryError, match="module:attr"):
        r.register("metric", "lazy", impl="auditlang.metrics.calibration.ece")
    with pytest.raises(RegistryError, match="unknown component kind"):
        r.register("widget", "w", impl=len)
    assert r.get("perturbation", "space").name == "space_insertion"
    assert r.get("perturbation", "space").load().__name__ == "insert_space"
    with pytest.raises(RegistryError) as err:
        r.get("perturbation", "space_insert")
    assert err.value.hint.startswith("did you mean 'space_insertion'?")
    view = r.view("perturbation")
    assert list(view) == ["space_insertion"] and "space" in view
    r.register("perturbation", "typo", impl=len)
    assert list(view) == ["space_insertion", "typo"]  # views are live
    r.register("perturbation", "typo", impl=min, replace=True)
    assert view["typo"] is min
    r.unregister("perturbation", "space_insertion")
    assert "space" not in view


class MyMatch(S.Obj):
    DOC: typing.ClassVar[str] = "A plugin evaluator (test)."
    extract: Extract = "first_line"


def test_a_component_registered_from_outside_is_a_language_constructor(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.audit"
    spec.write_text(
        'dataset tqa = jsonl("triviaqa.jsonl", task=open_qa, sample=5)\nmodel smol = embedded("gemma3-270m")\n'
        'variant v = variant("Q: {{ question }}\\nA:")\nprotocol p = token_prob(readout=T1)\n'
        "evaluator e = my_mach(extract=full)\n"
        "audit a {\n  models = [smol]\n  datasets = [tqa]\n  variants = [v]\n  protocols = [p]\n  evaluators = [e]\n}\n",
        encoding="utf-8")
    register("evaluator", "my_match", schema=MyMatch, impl="auditlang.evaluators.string_match:ExactMatchEvaluator")
    try:
        assert main(["check", str(spec)]) == 1
        err = capsys.readouterr().err
        assert "unknown evaluator constructor 'my_mach'" in err and "did you mean 'my_match'" in err
        spec.write_text(spec.read_text(encoding="utf-8").replace("my_mach", "my_match"), encoding="utf-8")
        assert main(["check", str(spec)]) == 0, capsys.readouterr().err
        spec.write_text(spec.read_text(encoding="utf-8").replace("extract=full", "extrct=full"), encoding="utf-8")
        assert main(["check", str(spec)]) == 1
        assert "unknown parameter 'extrct' for my_match()" in capsys.readouterr().err
    finally:
        REGISTRY.unregister("evaluator", "my_match")
    spec.write_text(spec.read_text(encoding="utf-8").replace("extrct=full", "extract=full"), encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    assert "unknown evaluator constructor 'my_match'" in capsys.readouterr().err


def test_a_perturbation_is_declared_once_and_seen_everywhere(tmp_path: Path, shared_data: Path, capsys) -> None:
    """Issue 26, item 1: a perturbation is one class; its ``Params`` (declared once) is what
    `auditc check` accepts, what the docs table and the language server show and what reaches
    ``apply`` when a plan is built. A parameter added only to ``Params`` shows up everywhere."""
    import json

    from pydantic import Field

    from auditlang.lsp.complete import complete
    from auditlang.lsp.docs import registry_table
    from auditlang.prompts.perturb import Perturbation

    seen = []

    class Suffix(Perturbation):
        name, source = "suffix_question", "test"

        class Params(Perturbation.Params):
            DOC: typing.ClassVar[str] = "test: append a suffix to the question"
            suffix: str = Field(default="?", description="the text appended")
            times: int = Field(default=1, ge=1)

        def apply(self, item, seed):
            seen.append((self.params.suffix, self.params.times))
            return {**item, "question": item["question"] + self.params.suffix * self.params.times}

    register("perturbation", "suffix_question", impl=Suffix)
    try:
        assert REGISTRY.get("perturbation", "suffix_question").schema is Suffix.Params
        row = next(ln for ln in registry_table("perturbation").splitlines() if "`suffix_question`" in ln)
        assert "`suffix` (`\"?\"`), `times` (1)" in row and "append a suffix" in row
        text = "perturbation p = suffix_question("
        labels = {i.label for i in complete(text, len(text), None)}
        assert {"suffix", "times", "seed"} <= labels, labels
        spec = tmp_path / "s.audit"
        body = ('import "stdlib/s000"\n'
                'dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=2, seed=1)\n'
                'model m = embedded("smollm2-135m-instruct")\n'
                'variant v = s000.surface_paraphrase with (perturb=[suffix_question(suffix="!!", times=TIMES)])\n'
                'audit a {\n  models = [m]\n  datasets = [arc]\n  variants = [v]\n  protocols = [s000.token_norm]\n}\n')
        spec.write_text(body.replace("TIMES", "0"), encoding="utf-8")
        assert main(["check", str(spec)]) == 1  # the field's limit (ge=1) is the resolver's
        assert "times" in capsys.readouterr().err
        spec.write_text(body.replace("TIMES", "2"), encoding="utf-8")
        out = tmp_path / "plan.json"
        assert main(["plan", str(spec), "--data-root", str(shared_data), "--format", "json", "-o", str(out)]) == 0
        assert seen and set(seen) == {("!!", 2)}
        assert "!!!!" in json.dumps(json.loads(out.read_text())["requests"])
    finally:
        REGISTRY.unregister("perturbation", "suffix_question")


def test_a_plugin_perturbation_gets_its_parameters(tmp_path: Path, shared_data: Path) -> None:
    import json

    calls = []

    class Tag(S.Obj):
        DOC: typing.ClassVar[str] = "test: append a tag to the question"
        seed: int | None = None
        tag: str = "x"

    def tag_question(item, seed, *, tag):
        calls.append(tag)
        return {**item, "question": f"{item['question']} [{tag}]", "perturbations": [*item.get("perturbations", ())]}

    register("perturbation", "tag_question", schema=Tag, impl=tag_question)
    try:
        spec = tmp_path / "s.audit"
        spec.write_text('import "stdlib/s000"\n'
                        'dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=2, seed=1)\n'
                        'model m = embedded("smollm2-135m-instruct")\n'
                        'variant v = s000.surface_paraphrase with (perturb=[tag_question(tag="zz")])\n'
                        'audit a {\n  models = [m]\n  datasets = [arc]\n  variants = [v]\n  protocols = [s000.token_norm]\n}\n',
                        encoding="utf-8")
        out = tmp_path / "plan.json"
        assert main(["plan", str(spec), "--data-root", str(shared_data), "--format", "json", "-o", str(out)]) == 0
        assert calls and set(calls) == {"zz"}
        assert "[zz]" in json.dumps(json.loads(out.read_text())["requests"])
    finally:
        REGISTRY.unregister("perturbation", "tag_question")
