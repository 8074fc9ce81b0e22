"""Facts of what was run, for sentences the methods paragraph and the checklist share: the
generation budgets of the planned requests, where a first-token protocol's logprob window came
from on the engine that ran it, how many answers start with a label, and how many token
confidences fell back to the window's most probable label (``label_source = window_argmax``).

Everything is read from the plan's requests, the engine fingerprints and the records; the engine's
calls are those :func:`auditlang.core.capabilities.engine_calls` says it makes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pandas as pd

from auditlang.core.capabilities import call_shape, engine_calls
from auditlang.report.rundata import RunData
from auditlang.prompts.render import TemplateError
from auditlang.resolve.models import declared_model, model_config
from auditlang.resolve.templates import compile_obj
from auditlang.resolve.schema import EMBEDDED_MODELS
from auditlang.metrics.registry import METRICS
from auditlang.score.cellmetrics import audit_metrics, parses_verbal
from auditlang.store.rundir import RECORDS


def _requests(rd: RunData, aid: str, *, protocol: str | None = None, variant: str | None = None):
    """(model, {role: request}) of the audit's planned stage-1 test requests, per item."""
    for key, unit in getattr(rd.plan, "units", {}).items():
        if key[0] != aid or key[4] != "test" or (variant is not None and key[3] != variant):
            continue
        for pid, per_item in unit.stage1.items():
            if protocol is None or pid == protocol:
                for reqs in per_item:
                    yield key[1], reqs


def chat_models(rd: RunData, aid: str) -> dict[str, bool]:
    """model -> whether its planned answer prompts are chat messages (the engine applies the
    model's chat template) or plain text (a base model, or chat off): what the engine was given.
    Models without a planned request fall back to the spec's rule (``resolve.models``)."""

    out: dict[str, bool] = {}
    for mid, reqs in _requests(rd, aid):
        r = reqs.get("answer") or next(iter(reqs.values()), None)
        if mid not in out and r is not None and getattr(r, "prompt", None) is not None:
            out[mid] = r.prompt.messages is not None
    for mid in rd.audit(aid).models:
        if mid not in out:
            out[mid] = bool(model_config(rd.spec, mid).chat)
    return {m: out[m] for m in rd.audit(aid).models}


def answer_budgets(rd: RunData, aid: str) -> Counter:
    """max_tokens of the audit's unique planned answer requests, counted (empty: not in the plan)."""
    return answer_budgets_of(rd, aid, None)


def answer_budgets_of(rd: RunData, aid: str, variant: str | None) -> Counter:
    """:func:`answer_budgets` of one variant's answers (all variants with None)."""
    got: Counter = Counter()
    seen: set[str] = set()
    for _, reqs in _requests(rd, aid, variant=variant):
        r = reqs.get("answer")
        if r is None or r.kind != "generate" or r.id in seen:
            continue
        seen.add(r.id)
        got[int(dict(r.params).get("max_tokens") or 0)] += 1
    return got


def budget_text(got: Counter) -> str | None:
    """'at most 16 new tokens (max_tokens=16)' for one budget; a breakdown for several."""
    if not got:
        return None
    if len(got) == 1:
        mt = next(iter(got))
        return f"at most {mt} new tokens (max_tokens={mt})"
    return "max_tokens " + ", ".join(f"{mt} ({n} requests)" for mt, n in sorted(got.items()))


def engine_of(rd: RunData, mid: str) -> tuple[str, bool]:
    """(engine that ran model ``mid``, whether a fingerprint says so); else the declared engine
    (or the run's --engine override)."""
    fp = rd.fingerprints.get(mid) or {}
    if fp.get("engine"):
        return str(fp["engine"]), True
    override = (rd.run_info or {}).get("engine_override")
    return (override or declared_model(rd.spec, mid)[0]), False


def _window_source(engine: str, ans: Any, first: Any) -> str:
    p = dict(first.params)
    shared = ans is not None and first.id == ans.id
    if first.kind == "generate":
        k = max(int(p.get("first_top_logprobs") or 0), int(p.get("top_logprobs") or 0))
        mt = p.get("max_tokens")
        if not shared:
            return f"a dedicated max_tokens={mt} call (top-{k} logprob window)"
        calls = engine_calls(engine, first.kind, call_shape(first.kind, p))
        if engine == "vllm" and len(calls) > 1:
            return (f"a separate one-token request (logprobs={k}) on the answer prompt, which the vllm engine sends "
                    f"beside the answer's own generation (max_tokens={mt})")
        return (f"the first generated position of the answer's own greedy generation (max_tokens={mt}; the "
                f"{engine} engine returns the top-{k} window at that position, no separate call)")
    calls = engine_calls(engine, first.kind, call_shape(first.kind, p))
    return f"a {first.kind} request ({'; '.join(calls)})"


def first_window_sources(rd: RunData, aid: str, pid: str) -> dict[str, list[str]]:
    """How the first-token window of protocol ``pid`` was obtained -> the models it holds for
    (a model whose engine is not fingerprinted is marked 'declared engine')."""
    per_model: dict[str, str] = {}
    for mid, reqs in _requests(rd, aid, protocol=pid):
        first = reqs.get("first")
        if first is None or mid in per_model:
            continue
        engine, ran = engine_of(rd, mid)
        per_model[mid] = _window_source(engine, reqs.get("answer"), first) + ("" if ran else " [declared engine; "
                                                                             "no fingerprint recorded]")
    out: dict[str, list[str]] = {}
    for mid, text in per_model.items():
        out.setdefault(text, []).append(mid)
    return out


def _label_start(text: str, labels: list[str]) -> bool:
    m = re.match(r"\s*([A-Za-z0-9]+)", text or "")
    return bool(m) and m.group(1) in labels


def label_start_share(rd: RunData, aid: str, pid: str) -> tuple[int, int] | None:
    """(answers whose text starts with a valid label as a whole word, answers) over the protocol's
    unique answers (model, dataset, variant, item), from records.parquet's generations; None when
    they or the labels are not there."""
    df = rd.records
    if df is None or not len(df):
        return None
    mine = df[(df["audit"] == aid) & (df["protocol"] == pid)]
    labels = next((list(ex["label_probs"]) for i in mine.index[:50] if (ex := rd.extras(i)).get("label_probs")), None)
    path = rd.run_dir / RECORDS
    if not labels or not path.is_file():
        return None
    try:
        gen = pd.read_parquet(path, columns=["cell_id", "protocol", "model", "dataset", "variant", "item_id",
                                             "generation", "status"])
    except (OSError, ValueError, KeyError):
        return None
    gen = gen[gen["cell_id"].str.startswith(aid + "/") & (gen["protocol"] == pid) & (gen["status"] == "ok")]
    gen = gen.drop_duplicates(["model", "dataset", "variant", "item_id"])
    if not len(gen):
        return None
    hit = sum(_label_start(str(g), labels) for g in gen["generation"].tolist())
    return hit, int(len(gen))


def argmax_rows(rd: RunData, aid: str, pid: str) -> tuple[int, int, int] | None:
    """(rows whose label is the window's argmax, rows with no valid label in the window, rows)
    of protocol ``pid``; None when the records carry no ``label_source``."""
    df = rd.records
    if df is None or not len(df):
        return None
    rows = df[(df["audit"] == aid) & (df["protocol"] == pid)]
    src = Counter(rd.extras(i).get("label_source") for i in rows.index)
    if not rows.shape[0] or set(src) == {None}:
        return None
    return src.get("window_argmax", 0), src.get("none", 0), int(rows.shape[0])


def embedded_source(fp: dict) -> str | None:
    """'a 4-bit Q4_1 GGUF quantisation of HuggingFaceTB/SmolLM2-135M-Instruct, de-quantised to float32'
    for an embedded model's fingerprint; None for other models."""
    if not isinstance(fp.get("embedded"), dict):
        return None
    info = EMBEDDED_MODELS.get(str(fp.get("model")))
    if not info or not info.get("gguf"):
        return None
    emb = fp["embedded"]
    return (f"a {info['bits']}-bit {info['gguf']} GGUF quantisation of {info['upstream']}, de-quantised to "
            f"{emb.get('dtype') or 'float32'}" + (f" and run in {fp['dtype']}" if fp.get("dtype") and
                                                  fp.get("dtype") != (emb.get("dtype") or "float32") else ""))


DEGENERATE_MIN_ITEMS = 5  # fewer answered items than this: one shared prediction may be chance
# an option list written back: a label (A-J) opening a line, then ")", "." or ":"
_OPTION_MARK = re.compile(r"^[ \t]*\(?([A-J])[).:](?=\s|$)", re.M)


def echoes_options(text: str) -> bool:
    """Whether an answer writes back an option list: two or more distinct option labels each
    opening a line ("A. Rome\nB. Lima"), not one answer ("A. Rome. The answer is B" is one)."""
    return len({m.group(1) for m in _OPTION_MARK.finditer(text or "")}) >= 2


def _generations(rd: RunData) -> pd.DataFrame | None:
    path = rd.run_dir / RECORDS
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path, columns=["cell_id", "item_id", "generation", "status"])
    except (OSError, ValueError, KeyError):
        return None


def degenerate_cells(rd: RunData, aid: str | None = None) -> list[tuple[str, list[str], str]]:
    """Answer sets that are not answers to the items, from records.parquet: every answered item
    of a (model, dataset, variant, evaluator) predicts the same label (at least
    ``DEGENERATE_MIN_ITEMS`` items), or most generations write back the option list.

    Returns ``(model / dataset / variant / evaluator, [cell ids], what)`` per answer set, e.g.
    ``"predicts 'A' for 20/20 items"``. Cells of one answer set (its protocols) are grouped,
    since they score the same answers. Computed once per run (every report file asks)."""
    return [(where, cells, what) for a, where, cells, what in _once(rd, "degenerate", lambda: _degenerate_all(rd))
            if aid is None or a == aid]


def _once(rd: RunData, key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()`` the first time ``key`` is asked for on this run, then its stored value (every
    report file, and every part of a table split for the page, asks for the same run facts)."""
    memo = rd.__dict__.setdefault("_runfacts_memo", {})
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _degenerate_all(rd: RunData) -> list[tuple[str, str, list[str], str]]:
    """:func:`degenerate_cells` of every audit, each with its audit id first."""
    df = rd.records
    if df is None or not len(df):
        return []
    gens = _generations(rd)
    gen_of: dict[tuple[str, str], str] = {}
    if gens is not None:
        ok = [s == "ok" for s in gens["status"].tolist()]
        gen_of = {(str(c), str(i)): str(g) for c, i, g, o in zip(gens["cell_id"].tolist(), gens["item_id"].tolist(),
                                                                  gens["generation"].tolist(), ok) if o}
    cols = {c: df[c].tolist() for c in ("cell_id", "audit", "model", "dataset", "variant", "evaluator", "pred",
                                         "parsed", "gold", "item_id")}
    rows_of: dict[str, list[int]] = {}
    for i, cid in enumerate(cols["cell_id"]):
        rows_of.setdefault(cid, []).append(i)
    out: dict[tuple, tuple[list[str], str]] = {}
    for cid, rows in rows_of.items():
        n = len(rows)
        what: list[str] = []
        preds = [cols["pred"][i] for i in rows if cols["parsed"][i] and cols["pred"][i] is not None]
        top = Counter(preds).most_common(1)
        if n >= DEGENERATE_MIN_ITEMS and top and top[0][1] == n:
            golds = Counter(cols["gold"][i] for i in rows)
            what.append(f"predicts {top[0][0]!r} for {n}/{n} items (the gold label is {top[0][0]!r} for "
                        f"{golds.get(top[0][0], 0)}/{n})")
        first = rows[0]
        task = rd.task(str(cols["dataset"][first])) if hasattr(rd, "task") else None
        if gen_of and n >= DEGENERATE_MIN_ITEMS and task in ("multiple_choice", "classification"):
            echo = sum(echoes_options(gen_of.get((str(cid), str(cols["item_id"][i])), "")) for i in rows)
            if 2 * echo > n:
                what.append(f"writes back the option list instead of one answer in {echo}/{n} generations")
        if what:
            key = tuple(str(cols[c][first]) for c in ("audit", "model", "dataset", "variant", "evaluator")) + ("; ".join(what),)
            out.setdefault(key, ([], "; ".join(what)))[0].append(str(cid))
    return [(k[0], " / ".join(k[1:5]), cells, what) for k, (cells, what) in out.items()]


def degenerate_lines(rd: RunData, aid: str | None = None, only: set[str] | None = None) -> list[str]:
    """One sentence per degenerate answer set (:func:`degenerate_cells`); ``only``: of these cells."""
    out = []
    for where, cells, what in degenerate_cells(rd, aid):
        if only is not None:
            cells = [c for c in cells if c in only]
            if not cells:
                continue
        protos = sorted({c.split("/")[4] for c in cells if c.count("/") >= 5})
        out.append(f"cell {where} {what}" + (f" (the cells of protocol{'s' if len(protos) > 1 else ''} "
                                             f"{', '.join(protos)})" if protos else ""))
    return out


SCALE_DIVISOR = {"decimal_01": 1.0, "percent_0_100": 100.0, "integer_0_100": 100.0, "scale_0_10": 10.0}
# "e.g. 0.8", "for example 80%", "such as 7": the value a phrasing shows as an example reply
_EXAMPLE = re.compile(r"(?:e\.\s?g\.|for example|for instance|such as|example:)\s*,?\s*[\"'(]?\s*"
                      r"(\d+(?:\.\d+)?|\.\d+)\s*(%|percent)?", re.I)


def example_value(rd: RunData, pid: str) -> tuple[float, str] | None:
    """(the confidence a verbal protocol's phrasing shows as an example reply, on the 0-1 scale the
    parser reads; the phrase as written), from the phrasing template's source; None without one."""
    o = rd.spec.get(pid)
    field = getattr(type(o.value), "PHRASING", None)  # the field holding its elicitation wording
    tid = getattr(o.value, field, None) if field else None
    if not parses_verbal(rd.spec, pid) or not tid or not hasattr(o.value, "scale"):
        return None
    try:
        src = compile_obj(rd.spec, rd.spec.get(tid)).source
    except (TemplateError, KeyError):
        return None
    m = _EXAMPLE.search(src)
    if not m:
        return None
    div = 100.0 if m.group(2) else SCALE_DIVISOR.get(str(o.value.scale), 1.0)
    return float(m.group(1)) / div, m.group(0).strip()


def verbal_example_shares(rd: RunData, aid: str) -> list[tuple[str, str, int, int, float, str]]:
    """(protocol, model, parsed confidences equal to the phrasing's example value, parsed
    confidences, the value, the phrase) per verbal protocol and model of the audit; one
    confidence per (model, dataset, variant, item): evaluators share it. Computed once per run and
    audit (every per-cell table, and every part of one split for the page, asks)."""
    return list(_once(rd, ("example_shares", aid), lambda: _verbal_example_shares(rd, aid)))


def _verbal_example_shares(rd: RunData, aid: str) -> list[tuple[str, str, int, int, float, str]]:
    df = rd.records
    out: list[tuple[str, str, int, int, float, str]] = []
    if df is None or not len(df):
        return out
    for pid in rd.audit(aid).protocols:
        ex = example_value(rd, pid)
        if ex is None:
            continue
        rows = df[(df["audit"] == aid) & (df["protocol"] == pid) & df["confidence_parsed"].astype(bool)]
        rows = rows[~rows["confidence"].isna()].drop_duplicates(["model", "dataset", "variant", "item_id"])
        for mid, g in rows.groupby("model", sort=False):
            conf = g["confidence"].to_numpy(dtype=float)
            hit = int((abs(conf - ex[0]) < 1e-9).sum())
            out.append((pid, str(mid), hit, int(len(conf)), ex[0], ex[1]))
    return out


def example_value_lines(rd: RunData, aid: str) -> list[str]:
    """A warning per verbal protocol and model whose parsed confidences are mostly the example
    value its own prompt shows (the model copies the example instead of stating a confidence)."""
    return [f"{hit} of {n} parsed verbal confidences of {pid} from model {mid} equal {value:g}, the example value "
            f"its prompt shows (\u201c{phrase}\u201d): the model copies the example rather than stating a confidence"
            for pid, mid, hit, n, value, phrase in verbal_example_shares(rd, aid) if n and 2 * hit > n]


def conf_count_lines(rd: RunData, aid: str | None = None, cells: set[str] | None = None) -> list[str]:
    """Cells whose confidence metrics use fewer items than n (the confidence did not parse or was
    missing for the rest): 'cell X: n_conf=2 of n=20'. The cells are found once per run."""
    return [line for cid, line in _once(rd, "conf_count", lambda: _conf_count_all(rd))
            if (aid is None or cid.split("/")[0] == aid) and (cells is None or cid in cells)]


def _conf_count_all(rd: RunData) -> list[tuple[str, str]]:
    """(cell id, line) of :func:`conf_count_lines` for every cell of the run."""
    c = rd.cells
    if c is None or c.empty or "n_conf" not in c.columns:
        return []
    out = []
    for d in c.to_dict("records"):
        cid = str(d["cell_id"])
        n, nc = d.get("n"), d.get("n_conf")
        if n is None or nc is None or n != n or nc != nc or int(nc) >= int(n) or _decision_only(rd, str(d["protocol"])):
            continue
        out.append((cid, f"{' / '.join(cid.split('/')[1:])}: n_conf={int(nc)} of n={int(n)}"))
    return out


def conf_count_note(rd: RunData, aid: str | None = None, cells: set[str] | None = None) -> str | None:
    lines = conf_count_lines(rd, aid, cells)
    if not lines:
        return None
    return ("The confidence-based metrics (all but accuracy) of these cells are computed on the n_conf items whose "
            "confidence was read, not on n: " + "; ".join(lines) + ".")


def _decision_only(rd: RunData, pid: str) -> bool:
    """A protocol whose records hold abstain decisions and no confidence (abstention probes):
    confidence metrics do not apply to its cells."""
    df = rd.records
    if df is None or not len(df):
        return False
    rows = df[df["protocol"] == pid]
    if not len(rows) or not rows["confidence"].isna().all():
        return False
    return rd.extras(rows.index[0]).get("abstain") is not None


decision_only = _decision_only


def not_applicable(rd: RunData) -> dict[str, set[str]]:
    """cell id -> the cells-table columns that do not apply to it: ``vpr`` of a cell whose
    confidence is not a stated number, ``excluded`` where no VPR rule applies (a non-verbal cell,
    or no declared threshold), and the confidence columns (every metric but accuracy,
    ``mean_confidence``) of a protocol that records abstain decisions only."""
    c = rd.cells
    out: dict[str, set[str]] = {}
    if c is None or c.empty:
        return out
    conf_cols = {"mean_confidence"}
    for aid in rd.audit_ids():
        for ref in audit_metrics(rd.spec, aid):
            spec_m = METRICS.get(ref.name)
            if spec_m is not None and spec_m.inputs == "conf+correct":
                conf_cols.add(ref.label)
    decisions = {p: _decision_only(rd, p) for p in set(map(str, c["protocol"]))}
    for d in c.to_dict("records"):
        cid, aid = str(d["cell_id"]), str(d["cell_id"]).split("/")[0]
        cols: set[str] = set()
        pid = str(d["protocol"])
        if not parses_verbal(rd.spec, pid):  # VPR applies only where the program reads a stated number
            cols |= {"vpr", "excluded", "scale_mismatch_rate"}
        elif aid in rd.spec.objects and not rd.vpr_declared(aid):
            cols.add("excluded")
        if decisions.get(str(d["protocol"])):
            cols |= conf_cols
        if cols:
            out[cid] = cols
    return out


def cell_notes(rd: RunData, aid: str | None = None, cells: set[str] | None = None, warnings: bool = False) -> list[str]:
    """The notes every per-cell table carries (Markdown, LaTeX, HTML) for its cells: confidence
    metrics on fewer items than n; with ``warnings`` (the HTML report only) also the WARNING lines
    of degenerate answer sets and of verbal confidences that copy the prompt's example value. Paper
    tables stay clean (issue 34 item 5): those warnings are the checklist's (its summary)."""
    out = [f"WARNING: {ln}" for ln in degenerate_lines(rd, aid, cells)] if warnings else []
    note = conf_count_note(rd, aid, cells)
    if note:
        out.append(note)
    for a in ([aid] if aid is not None and warnings else rd.audit_ids() if warnings else []):
        mids = None if cells is None else {c.split("/")[1] for c in cells if c.startswith(a + "/")}
        if mids == set():
            continue
        out += [f"WARNING: {ln}" for ln in example_value_lines(rd, a)
                if mids is None or any(f"from model {m} " in ln for m in mids)]
    return out


__all__ = ["answer_budgets", "answer_budgets_of", "argmax_rows", "budget_text", "cell_notes", "chat_models", "conf_count_lines", "conf_count_note", "decision_only", "degenerate_cells", "not_applicable",
           "example_value", "example_value_lines", "verbal_example_shares", "degenerate_lines", "echoes_options",
           "embedded_source", "engine_of", "first_window_sources",
           "label_start_share"]
