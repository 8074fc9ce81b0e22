"""Metrics in the component registry (kind ``metric``), so the compiler can check ``ece(bins=10, binning=equal_width)``.

Every built-in metric is declared here: its parameters once, as a ``Params`` model (an
:class:`~auditlang.core.params.Obj`, the form every component kind uses: the resolver checks a
spec against it, the language server and docs/metrics.md's table show it), its implementation as
a ``"module:attr"`` string imported on first use, and ``meta["inputs"]`` what it consumes. This
module imports no numpy, so ``auditc check`` validates metric parameters without loading one
metric function. ``METRICS`` is a live read-only view of the registry as :class:`MetricSpec`;
code outside the package adds a metric with :func:`register` (or ``core.registry.register``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError

from auditlang.core.params import Obj
from auditlang.core.registry import REGISTRY, Entry

INPUT_KINDS = ("conf+correct", "correct")
# the level a metric is computed at: "cell" metrics are columns of metrics/cells.csv (an audit's
# ``metrics = [...]``); any other level (a pair of models, a set of variants, ...) is computed by
# the comparison named in ``shown_by`` and cannot be an audit's cell metric (resolver E134)
CELL = "cell"
CELL_INPUTS = ("conf+correct", "correct", "verbal")

Binning = Literal["equal_width", "equal_mass"]  # ``ece``/``mce`` bin placement (metrics/calibration.py)
Closed = Literal["left", "right"]  # which end of a bin is closed
BINNINGS, CLOSED = get_args(Binning), get_args(Closed)


class NoParams(Obj):
    """A metric without parameters."""


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric as the scorer sees it; ``fn`` imports the implementation on first use."""

    name: str
    impl: Any  # the function, or its "module:attr"
    schema: type[Obj] = NoParams
    inputs: str = "conf+correct"
    doc: str = ""
    level: str = CELL
    shown_by: str | None = None  # the comparison that computes a metric of another level
    family: str | None = None  # what it measures: "calibration" for a calibration-error estimator
    words: str | Callable[[dict[str, Any]], str] | None = None  # how a methods sentence names it

    def prose(self, params: Mapping[str, Any]) -> str:
        """The metric as a methods sentence names it, with its parameters: ``words`` (a callable
        takes the parameters and pops those it states), then the parameters it left, in
        parentheses; the metric's name with spaces when it declares no words."""
        p = {k: v for k, v in params.items() if k != "missing"}
        if callable(self.words):
            base = self.words(p)
        else:
            base = self.words or self.name.replace("_", " ")
        rest = [f"{k} {v}" for k, v in p.items() if v is not None]
        return base + (f" ({', '.join(rest)})" if rest else "")

    @property
    def fn(self) -> Callable[..., Any]:
        return Entry("metric", self.name, self.schema, self.impl).load()

    @property
    def params(self) -> dict[str, Any]:
        """Parameter name -> its pydantic field (type, default, limits, description)."""
        return dict(self.schema.model_fields)


def _spec(entry: Entry) -> MetricSpec:
    inputs = entry.meta.get("inputs", "conf+correct")
    level = entry.meta.get("level") or (CELL if inputs in CELL_INPUTS else f"not a cell ({inputs})")
    return MetricSpec(entry.name, entry.impl, entry.schema or NoParams, inputs, entry.doc, level, entry.meta.get("shown_by"),
                      entry.meta.get("family"), entry.meta.get("words"))


METRICS: Mapping[str, MetricSpec] = REGISTRY.view("metric", _spec)


def register(name: str, fn: Callable[..., Any] | str, params: type[Obj] | None = None,
             inputs: str = "conf+correct", doc: str = "", replace: bool = False, level: str | None = None,
             shown_by: str | None = None, family: str | None = None,
             words: str | Callable[[dict[str, Any]], str] | None = None) -> MetricSpec:
    """Add a metric under its spec-level ``name``: ``fn`` (or its ``"module:attr"``), ``params`` its
    ``Params`` model (an ``Obj`` subclass; none: no parameters). ``inputs`` says what it consumes
    (``"conf+correct"``, ``"correct"``, ``"verbal"`` or free text for study-specific metrics).
    ``level`` is where it is computed: ``"cell"`` (the default for ``conf+correct``, ``correct`` and
    ``verbal`` inputs: a column of cells.csv) or another level (``"pair of models"``, ...) computed
    by the comparison ``shown_by``. ``family="calibration"`` marks a calibration-error estimator (the
    checklist's calibration item, study 001's estimator axis); ``words`` is how the methods text names
    it (a string, or a callable of the parameters that pops those it states). A taken name raises
    unless ``replace=True``."""
    if params is not None and not (isinstance(params, type) and issubclass(params, Obj)):
        raise ValueError(f"register: the parameters of metric {name!r} are an Obj subclass (its Params model)")
    return _spec(REGISTRY.register("metric", name, impl=fn, schema=params or NoParams, doc=doc, replace=replace,
                                   inputs=inputs, level=level, shown_by=shown_by, family=family, words=words))


_TYPES = {"int_type": "int", "float_type": "float", "bool_type": "bool", "string_type": "str"}


def validate_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Check a spec-level call like ``ece(bins=10)`` against the metric's ``Params`` and return
    every parameter with defaults filled in (ints accepted for floats, nothing else coerced).

    Raises ValueError for an unknown metric or parameter, a wrong type or a value out of range.
    """
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}")
    schema = METRICS[name].schema
    unknown = set(params) - set(schema.model_fields)
    if unknown:
        allowed = ", ".join(schema.model_fields) or "none"
        raise ValueError(f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    try:
        return schema.model_validate(dict(params), strict=True).values()
    except ValidationError as e:
        raise ValueError(_message(name, schema, params, e.errors()[0])) from None


def _message(name: str, schema: type[Obj], params: Mapping[str, Any], err: Mapping[str, Any]) -> str:
    """A pydantic error as ``ece: parameter bins must be >= 1, got 0``."""
    p = str(err["loc"][0]) if err["loc"] else "parameters"
    if err["type"] == "missing":
        return f"{name}: parameter {p} is required"
    value, ctx = params.get(p), err.get("ctx") or {}
    if err["type"] == "literal_error":
        return f"{name}: parameter {p} must be one of {literal_values(schema, p)}, got {value!r}"
    for key, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if key in ctx:
            return f"{name}: parameter {p} must be {op} {ctx[key]}, got {value!r}"
    if err["type"] in _TYPES:
        return f"{name}: parameter {p} must be of type {_TYPES[err['type']]}, got {value!r}"
    return f"{name}: parameter {p}={value!r}: {err['msg']}"


def literal_values(schema: type[Obj], param: str) -> list[Any]:
    """The allowed values of a ``Literal`` parameter (empty for any other)."""
    ann = schema.model_fields[param].annotation
    return [a for a in getattr(ann, "__args__", ()) if not isinstance(a, type)]


def spec_for(fn: Callable[..., Any]) -> MetricSpec | None:
    """The registered descriptor whose function is ``fn`` (first match), else None."""
    for spec in METRICS.values():
        if spec.fn is fn:
            return spec
    return None


# ------------------------------------------------------------------ the built-in metrics' parameters

MissingPolicy = Literal["error", "drop"]


def _missing() -> Any:
    return Field("error", description="policy for NaN confidences")


class MissingParams(Obj):
    missing: MissingPolicy = _missing()


class BinnedParams(Obj):
    bins: int = Field(10, ge=1, description="number of bins")
    binning: Binning = Field("equal_width", description="bin placement")
    closed: Closed = Field("left", description="which bin end is closed")
    missing: MissingPolicy = _missing()


class SmoothEceParams(Obj):
    sigma: float | None = Field(None, ge=1e-6, le=10.0, description="fixed bandwidth; default: fixed point")
    missing: MissingPolicy = _missing()


class NllParams(Obj):
    eps: float = Field(1e-6, ge=1e-15, le=0.49, description="probability clip")
    missing: MissingPolicy = _missing()


class SelectiveAccuracyParams(Obj):
    coverage: float = Field(ge=1e-9, le=1.0, description="fraction answered")
    missing: MissingPolicy = _missing()


class EqualWidthBinsParams(Obj):
    bins: int = Field(10, ge=1, description="number of equal-width bins")


class ZeroDivisionParams(Obj):
    zero_division: float = Field(0.0, description="value of a ratio with an empty denominator (NaN allowed)")


class CalibrationGapParams(Obj):
    estimator: str = Field("ece", description="registered calibration metric: ece (A/B) or binfree_ece (C/D)")


class ASstParams(Obj):
    contrast: Literal["min", "not_max"] = Field(
        "min", description="compare Y^max with Y^min or with every answer outside Y^max")


class LabelCoverageParams(Obj):
    logprobs: bool = Field(True, description="window values are log-probabilities")


class EceGapParams(EqualWidthBinsParams):
    same_rows: bool = Field(False, description="score ECE_token on the parsed rows only")


# ------------------------------------------------------------------ the built-in metrics

def _binned(base: str) -> Callable[[dict[str, Any]], str]:
    def words(p: dict[str, Any]) -> str:
        bins, binning = p.pop("bins", 10), p.pop("binning", "equal_width")
        return f"{base} with {bins} {'equal-mass' if binning == 'equal_mass' else 'equal-width'} bins"
    return words


def _smooth_ece(p: dict[str, Any]) -> str:
    return "smooth ECE" + (f" with bandwidth {p.pop('sigma')}" if p.get("sigma") is not None else "")


def _nll(p: dict[str, Any]) -> str:
    return "negative log-likelihood of correctness" + (f" (probabilities clipped at {p.pop('eps')})" if "eps" in p else "")


def _selective(p: dict[str, Any]) -> str:
    return f"selective accuracy at {float(p.pop('coverage')):.0%} coverage" if "coverage" in p else "selective accuracy"


_M = "auditlang.metrics."
_CAL = "calibration"
register("accuracy", _M + "calibration:accuracy", inputs="correct", words="accuracy",
         doc="Fraction correct: ``mean(z_i)``. 0/1 (or boolean) input; NaN is rejected.")
for _name, _mod, _params, _family, _words, _doc in (
    ("ece", "calibration", BinnedParams, _CAL, _binned("expected calibration error (ECE)"),
     "Binned expected calibration error (Naeini et al. 2015; Guo et al. 2017)."),
    ("mce", "calibration", BinnedParams, _CAL, _binned("maximum calibration error"),
     "Maximum calibration error ``max_b |acc(S_b) - conf(S_b)|`` over non-empty bins (Naeini et al. 2015)."),
    ("smooth_ece", "kernel_ece", SmoothEceParams, _CAL, _smooth_ece,
     "Smooth ECE (Błasiok & Nakkiran 2024, ICLR, arXiv:2309.12236; study 001 §3.1)."),
    ("kde_ece", "kernel_ece", MissingParams, _CAL, "KDE-based ECE",
     'KDE-based ECE of Zhang, Kailkhura & Han (2020, "Mix-n-Match", ICML; study 001 §3.1).'),
    ("ks_ce", "calibration", MissingParams, _CAL, "Kolmogorov-Smirnov calibration error",
     'Kolmogorov–Smirnov calibration error (Gupta & Ramdas 2021, "KS-Cal"; study 001 §3.1).'),
    ("binfree_ece", "calibration", MissingParams, _CAL, "the bin-free ECE estimator of study 001",
     'The bin-free estimator mean of study 001 (§3.1 "Calibration estimator", configuration C).'),
    ("brier", "calibration", MissingParams, "scoring rule", "Brier score",
     "Brier score ``BS = (1/N) sum_i (c_i - z_i)^2`` (study 003 §2; study 001 App. L)."),
    ("nll", "calibration", NllParams, "scoring rule", _nll,
     "Clipped negative log-likelihood of correctness (study 001 App. L, ``eps = 1e-6``)."),
    ("auroc", "discrimination", MissingParams, "discrimination", "AUROC of confidence for predicting correctness",
     "Area under the ROC curve for predicting correctness from confidence (study 001 App. L)."),
    ("aurc", "selective", MissingParams, "selective prediction", "area under the risk-coverage curve",
     "Area under the risk–coverage curve (Geifman & El-Yaniv 2017; study 001 App. L)."),
    ("selective_accuracy", "selective", SelectiveAccuracyParams, "selective prediction", _selective,
     "Accuracy on the ``k = ceil(coverage * N)`` most confident answers (``k >= 1``)."),
):
    register(_name, f"{_M}{_mod}:{_name}", _params, doc=_doc, family=_family, words=_words)

_PAIR = "conf_a+correct_a+conf_b+correct_b"
_CANDIDATES = "candidate_conf_a+candidate_conf_b+candidate_correct"
for _name, _params, _inputs, _doc in (
    ("ia_retention", None, "correct_a+correct_b", "|D_IA| / |D| (003 App. E.4)"),
    ("ia_ece_diff", EqualWidthBinsParams, _PAIR, "Instance-Aligned ECE(A) - ECE(B) (003 §4.1)"),
    ("ia_brier_diff", None, _PAIR, "Instance-Aligned BS(A) - BS(B) (003 §4.1)"),
    ("da_ece_diff", EqualWidthBinsParams, _PAIR, "Distribution-Aligned ECE(A) - ECE(B) (003 §4.2)"),
    ("da_brier_diff", None, _PAIR, "Distribution-Aligned BS(A) - BS(B) (003 §4.2)"),
    ("ca_ece_diff", EqualWidthBinsParams, _CANDIDATES, "Candidate-Aligned ECE(A) - ECE(B) (003 §4.3)"),
    ("ca_brier_diff", None, _CANDIDATES, "Candidate-Aligned BS(A) - BS(B) (003 §4.3)"),
):
    register(_name, _M + "aligned:" + _name, _params, inputs=_inputs, doc=_doc, level="pair of models", shown_by="aligned")
register("ranking_reversals", _M + "aligned:ranking_reversals", inputs="model -> raw value, model -> aligned value",
         doc="model pairs whose order flips between the raw and an aligned view (003 §5.2)",
         level="set of models", shown_by="aligned")

_DEC = "decisions_1+decisions_2"
for _name, _fn, _inputs, _level, _doc in (
    ("iou_acc", "iou_acc", _DEC, "cells", "|A1 & A2| / |A1 | A2| (004 §3)"),
    ("iou_rej", "iou_rej", _DEC, "cells", "|R1 & R2| / |R1 | R2| (004 §3)"),
    ("iou_cons", "iou_cons", _DEC, "cells", "harmonic mean of IoU_acc and IoU_rej (004 §3)"),
    ("dec_cons", "decision_consistency", _DEC, "cells", "share of decided questions with equal decisions (004 §3)"),
    ("agreement", "agreement", _DEC + "+answers_1+answers_2", "cells",
     "share of commonly accepted questions with the same model answer (004 §3)"),
    ("common_accept_accuracy", "common_accept_accuracy", _DEC + "+correct_1+correct_2", "cells",
     "mean accuracy over commonly accepted questions (004 App. C)"),
    ("abstain_precision", "abstain_precision", "abstain+correct", "abstain",
     "abstained-and-wrong / abstained (Feng et al. 2024b; 004 §5.4)"),
    ("abstain_recall", "abstain_recall", "abstain+correct", "abstain",
     "abstained-and-wrong / wrong (Feng et al. 2024b; 004 §5.4)"),
    ("abstain_f1", "abstain_f1", "abstain+correct", "abstain", "harmonic mean of abstain precision and recall (004 §5.4)"),
):
    register(_name, _M + "consistency:" + _fn, ZeroDivisionParams, inputs=_inputs, doc=_doc, shown_by="consistency",
             level="pair of cells (two decision sets)" if _level == "cells" else "set of abstention decisions")

register("calibration_gap", _M + "protocol:calibration_gap", CalibrationGapParams, inputs="verbal+token+correct",
         doc="g_X = ECE(verbal) - ECE(token) for one configuration (001 §3.2)",
         level="pair of cells (verbal and token configuration)", shown_by="protocol_grid")

_ANSWERS = "per-item answer confidences+semantic groups"
register("p_rb", _M + "robustness:p_rb", inputs="items x prompts confidence",
         doc="1 - mean per-item std of confidence across equivalent prompts (002 eq. 3)",
         level="set of prompts", shown_by="robustness")
register("a_stb", _M + "robustness:a_stb", inputs=_ANSWERS,
         doc="1 - mean std of confidence within the largest semantic group (002 eq. 4)",
         level="set of prompts", shown_by="robustness")
register("a_sst", _M + "robustness:a_sst", ASstParams, inputs=_ANSWERS,
         doc="mean |Delta(Y^max, Y^min) - Delta(Y^max, Y^max)| (002 eqs. 5-7)",
         level="set of prompts", shown_by="robustness")

register("prompt_spread", _M + "spread:prompt_spread_arrays", inputs="correct per variant",
         doc="max - min accuracy over the named variant set (000 §3, Table 3)",
         level="set of variants", shown_by="spread")
register("size_spread_spearman", _M + "spread:size_spread_correlation", inputs="model sizes+spreads",
         doc="Spearman rho and p between parameter count and spread across models (000 §4.3, Table 10)",
         level="set of models", shown_by="size_spread")

register("topk_label_coverage", _M + "token:label_coverage", LabelCoverageParams, inputs="top-k windows+valid labels",
         doc="share of examples whose top-k window holds every valid label (000 App. C.3)",
         level="set of top-k windows", shown_by="norm_shift")

register("vpr", _M + "verbal:verbal_parse_rate", inputs="verbal", words="verbal parse rate",
         doc="verbal parse rate: share of rows whose verbal confidence parsed (000 App. D.1)")
register("overconf_vs_acc", _M + "verbal:overconf_vs_acc", inputs="verbal+correct",
         doc="mean verbal confidence minus accuracy on parsed rows (000 §4.2)",
         level="pair of cells (verbal and token)", shown_by="ece_gap")
register("overconf_vs_token", _M + "verbal:overconf_vs_token", inputs="verbal+token",
         doc="mean verbal minus mean token confidence on parsed rows (000 §4.2)",
         level="pair of cells (verbal and token)", shown_by="ece_gap")
register("ece_gap", _M + "verbal:ece_gap", EceGapParams, inputs="verbal+token+correct",
         doc="ECE_verbal - ECE_token (000 §4.2, Table 2)", level="pair of cells (verbal and token)", shown_by="ece_gap")
