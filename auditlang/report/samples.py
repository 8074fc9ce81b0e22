"""The sample browser: ``report/samples.html`` over every cell x item of a run (`auditc view`).

One static page (template ``templates/samples.html``, vanilla JS, no network) and one data file
``report/samples.data.js`` it loads with a ``<script>`` tag (so it opens from ``file://``). The
data holds each record of ``records.parquet`` (parsed label, correctness, confidence, status) and,
once per request id, the request as the journal recorded it before it ran (kind, parameters,
seed, prompt) and its stored result (raw answer text, forced choice, label logprobs, error).
Every stage-1 request and follow-up (P(True), verbalized confidence, constrained re-prompt,
judge) a record read is listed under its role. Rows are shown a page at a time, so a run with
10k items stays responsive. The page writes every string with ``textContent``: model output is
never parsed as HTML.

:class:`SamplesBuild` writes them for a report build: in one forked child that works while the
report builds its tables, checklist and figures, on a host with cores to spare
(``core.workers.fork_side("samples")``: 4 usable cores, ``AUDITLANG_SAMPLES_FORK`` 1 / 0 forces
it on / off), else in the build's own process when it needs them. The bytes are the same.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from auditlang.core.requests import Prompt
from auditlang.core.workers import ForkedCall, fork_call, fork_side
from auditlang.store.codec import result_json_texts
from auditlang.store.journal import Journal
from auditlang.store.rundir import JOURNAL, RECORDS, REPORT_DIR

__all__ = ["DATA_FILE", "PAGE_FILE", "SamplesBuild", "build_samples", "write_samples"]

PAGE_FILE = "samples.html"
DATA_FILE = "samples.data.js"
TEMPLATE = Path(__file__).parent / "templates" / "samples.html"
EXTRAS_MAX = 4000  # characters of a record's extras JSON shown (token windows can be long)
ROW_FIELDS = ("cell", "item_id", "item_index", "gold", "pred", "parsed", "parse_rule", "correct", "confidence",
              "confidence_parsed", "confidence_kind", "status", "error", "roles", "generation", "extras")
COLUMNS = ("cell_id", "model", "dataset", "variant", "protocol", "evaluator", "item_id", "item_index", "gold", "pred",
           "parsed", "parse_rule", "correct", "confidence", "confidence_parsed", "confidence_kind", "extras",
           "request_ids", "generation", "status", "error")

# (model, chat Prompt) -> (the text its chat template makes of it, how it was rendered), or
# (None, why it could not be rendered): the messages are then shown role-tagged
Render = Callable[[str, Prompt], "tuple[str | None, str]"]


def _num(x: Any) -> float | str | None:
    """A number for JSON: NaN -> null, an infinite logprob -> "-inf" / "inf"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    x = float(x)
    return ("-inf" if x < 0 else "inf") if math.isinf(x) else round(x, 6)


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items()) or "none"


def _request_view(d: dict[str, Any], render: Render | None) -> dict[str, Any]:
    p = d["prompt"]
    out: dict[str, Any] = {"model": d.get("model"), "kind": d.get("kind"), "params": _params(d.get("params") or {}),
                           "seed": d.get("seed")}
    if p.get("text") is not None:
        out["text"] = p["text"]
        out["how"] = "raw text prompt, sent as it is"
        return out
    msgs = p["messages"]
    out["messages"] = [[m["role"], m["content"]] for m in msgs]
    cont = ", continuing the last assistant message" if msgs and msgs[-1]["role"] == "assistant" else ""
    text, note = render(str(d.get("model")), Prompt.from_dict(p)) if render is not None else (None, None)
    if text is not None:
        out["text"], out["how"] = text, note
    elif note is not None:
        out["how"] = f"chat messages as role-tagged text{cont}: {note}, so no chat template applied here"
    else:
        out["how"] = (f"chat messages as role-tagged text{cont}; the engine applied the model's chat template "
                      "(`auditc view RUN_DIR` shows it applied with the model's local tokenizer)")
    return out


def _result_view(res: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a stored result, from its JSON (``Result.to_dict()``'s fields; a
    sample's ``tokens`` are not read: :func:`~auditlang.store.codec.result_json_texts`)."""
    out: dict[str, Any] = {}
    if res.get("error") is not None:
        out["error"] = str(res["error"])
    if res.get("samples") is not None:
        out["texts"] = [s["text"] or "" for s in res["samples"]]
        out["finish"] = [s.get("finish_reason", "stop") or "" for s in res["samples"]]
    if res.get("choice") is not None:
        out["choice"] = str(res["choice"])
    if res.get("choice_logprobs"):
        out["choice_logprobs"] = {str(k): _num(v) for k, v in res["choice_logprobs"].items()}
    if res.get("continuation") is not None:
        lps = [float(t["logprob"]) for t in res["continuation"]]
        out["continuation"] = f"{len(lps)} token(s), sum logprob {sum(lps):.4f}"
    if res.get("hidden_state") is not None:
        out["hidden"] = f"hidden state of {len(res['hidden_state'])} values"
    return out


def build_samples(run_dir: str | Path, fps: dict[str, str], render: Render | None = None,
                  title: str = "") -> dict[str, Any]:
    """The page's data from ``records.parquet`` and the journal; ``fps``: model -> the engine
    fingerprint hash its results are stored under (run.json ``fingerprints``)."""
    run_dir = Path(run_dir)
    cols = pq.read_table(run_dir / RECORDS, columns=list(COLUMNS)).to_pydict()
    n = len(cols["cell_id"])
    cells: dict[str, int] = {}
    cell_rows: list[dict[str, str]] = []
    rows: list[list[Any]] = []
    by_model: dict[str, set[str]] = {}
    for i in range(n):
        cid = cols["cell_id"][i]
        if cid not in cells:
            cells[cid] = len(cell_rows)
            cell_rows.append({k: cols[k][i] for k in ("model", "dataset", "variant", "protocol", "evaluator")} | {"id": cid})
        roles = json.loads(cols["request_ids"][i] or "{}")
        by_model.setdefault(cols["model"][i], set()).update(roles.values())
        extras = cols["extras"][i] or "{}"
        rows.append([cells[cid], cols["item_id"][i], cols["item_index"][i], cols["gold"][i], cols["pred"][i],
                     bool(cols["parsed"][i]), cols["parse_rule"][i], _num(cols["correct"][i]), _num(cols["confidence"][i]),
                     bool(cols["confidence_parsed"][i]), cols["confidence_kind"][i], cols["status"][i] or "ok",
                     cols["error"][i] or "", roles, cols["generation"][i] or "",
                     extras if len(extras) <= EXTRAS_MAX else extras[:EXTRAS_MAX] + " …(cut)"])
    requests, results = _journal_views(run_dir, by_model, fps, render)
    return {"title": title, "fields": ROW_FIELDS, "cells": cell_rows, "rows": rows, "requests": requests,
            "results": results, "rendered": render is not None}


def _journal_views(run_dir: Path, by_model: dict[str, set[str]], fps: dict[str, str],
                   render: Render | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Request id -> its request as recorded, and -> its stored result: under the model's own
    engine fingerprint, else the one that ran it (a judge's). Empty without a journal (records
    written by tests or copied alone; it is never opened, which would create one)."""
    requests: dict[str, Any] = {}
    results: dict[str, Any] = {}
    if not (run_dir / JOURNAL).exists() or not by_model:
        return requests, results
    with Journal(run_dir) as journal:
        stored = journal.stored_requests(set().union(*by_model.values()))
        want: dict[str, list[str]] = {}
        for mid, ids in by_model.items():
            own = fps.get(mid)
            for rid in sorted(ids):  # a set: sorted, so the data file's bytes do not depend on hash seeds
                fp_map = stored.get(rid, {})
                fp = own if own in fp_map or not fp_map else next(iter(fp_map))
                if fp is not None and rid not in requests:
                    want.setdefault(fp, []).append(rid)
                    if fp in fp_map:
                        requests[rid] = _request_view(fp_map[fp], render)
        for fp, ids in want.items():
            for rid, text in journal.result_texts(ids, fp):
                results[rid] = _result_view(result_json_texts(text))
    return requests, results


def _js(data: dict[str, Any]) -> str:
    """The data file: one assignment; ``<`` escaped so no text can close a script element."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    body = body.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"window.AUDITC_SAMPLES = {body};\n"


def write_samples(run_dir: str | Path, fps: dict[str, str], render: Render | None = None,
                  title: str = "") -> list[Path]:
    """Write ``report/samples.html`` and ``report/samples.data.js``; returns both paths."""
    out = Path(run_dir) / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    page, js = out / PAGE_FILE, out / DATA_FILE
    with _collector_paused():
        _atomic(js, _js(build_samples(run_dir, fps, render, title)))
    _atomic(page, TEMPLATE.read_text(encoding="utf-8"))
    return [page, js]


class SamplesBuild:
    """``report/samples.html`` and its data being written for one report build (from
    ``records.parquet`` and the journal, which the build does not change): started at once in a
    forked child where :func:`~auditlang.core.workers.fork_side` allows, collected by ``finish()``;
    elsewhere written by ``finish()``. A child that failed is not trusted: ``finish()`` then
    writes them here (an error is raised here, as in a serial build; ``child_error`` keeps the
    child's). ``close()`` on every path stops a child still working."""

    def __init__(self, run_dir: str | Path, fps: dict[str, str], title: str = "") -> None:
        self._args = (run_dir, fps, None, title)
        self._child: ForkedCall | None = fork_call(write_samples, *self._args) if fork_side("samples") else None
        self.forked = self._child is not None
        self.child_error: str | None = None

    def finish(self) -> list[Path]:
        """Both paths, once the files are written."""
        child, self._child = self._child, None
        if child is not None:
            self.child_error = child.wait()
            if self.child_error is None:
                out = Path(self._args[0]) / REPORT_DIR
                return [out / PAGE_FILE, out / DATA_FILE]
        return write_samples(*self._args)

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the data are built: they are hundreds of
    thousands of acyclic containers (decoded JSON), and each collection the allocations trigger
    walks the report's whole heap (about a third of the page's time at 16,000 requests)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
