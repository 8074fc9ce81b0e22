"""`auditc show SPEC CELL_OR_PATTERN`: the exact prompts a cell sends for one item, before any GPU time.

For every matching cell: each stage-1 request of the chosen item (kind, parameters, seed, request
id, the roles that use it and the other cells sharing it), its prompt as the model receives it
(chat template applied with the model's tokenizer only; no weights are loaded), and its follow-ups
(stage 2), built by ``FromJournal.item`` (the run's one builder) from a placeholder answer
``<answer>``, or with ``--run RUN_DIR`` from the answers stored there (shown with them). Follow-ups
no item builds from one answer (cross stage) are listed by role (``plan.deferred``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditlang.api import plan_spec
from auditlang.cli.common import EXIT_OK, StepLog, parse_limit, parse_model_args, print_diags, print_overrides
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UsageError
from auditlang.core.terminal import visible
from auditlang.core.requests import Request, Result, Sample
from auditlang.execute.access import load_allowances, not_downloaded, run_access, withhold_hub_token
from auditlang.plan.from_journal import FromJournal
from auditlang.plan.stage2 import EVALUATOR_ROLES
from auditlang.store.journal import Journal
from auditlang.store.rundir import JOURNAL, RUN_FILE, read_run_file
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config

MAX_SHARED = 10  # other cells named per request; the rest are counted


def cmd_show(args) -> int:
    limit = parse_limit(args.limit)
    spec = compile_spec(args.spec, model_args=parse_model_args(args))
    print_overrides(spec)
    step = StepLog()
    try:
        plan = show_plan(spec, args.data_root, limit, args.allow_host, args.allow_secret, step=step)
    finally:
        step(None)
    if plan.warnings:
        print_diags(plan.warnings)
    for note in plan.notes:
        if note.startswith("data root:") or "fallback file" in note:  # a replaced data_root; the source read
            print(visible(f"note: {note}"), file=sys.stderr)
    # prompts hold data and template text: control characters shown, not sent
    print(visible(show_text(spec, plan, args.cell, args.item, spec_name=args.spec, run_dir=getattr(args, "run", None))))
    return EXIT_OK


def show_plan(spec, data_root=None, limit=None, allow_hosts=(), allow_secrets=(), step=None):
    """The plan `auditc show` reads: a Hub dataset whose host is not allowed is read from the
    local cache (else its fallback file); nothing is downloaded."""
    allow = load_allowances(list(allow_hosts), list(allow_secrets))
    with withhold_hub_token(allow):
        return plan_spec(spec, None if data_root is None else str(data_root), limit, step=step,
                         no_download=not_downloaded(run_access(spec), allow))


def show_text(spec, plan, pattern: str, item: int = 0, spec_name: str | None = None,
              run_dir: str | Path | None = None) -> str:
    """What `auditc show` prints for the cells matching ``pattern`` (``auditlang.show``);
    ``run_dir``: build the follow-ups from that run's stored answers (``--run``)."""
    cells = [c for c in plan.cells if fnmatch.fnmatchcase(c.id, pattern)]
    if not cells:
        raise UsageError(f"no cell of {spec_name or spec.entry.name} matches {pattern!r}",
                         hint=no_match_hint(pattern, plan.cells))
    if item < 0:
        raise UsageError(f"--item {item}: expected a position >= 0 in the sampled items")
    sharing = cells_by_request(plan)
    tokenizers: dict[str, tuple[Any, str, dict]] = {}

    def tok(model: str) -> tuple[Any, str, dict]:
        if model not in tokenizers:
            tokenizers[model] = local_tokenizer(spec, model)
        return tokenizers[model]

    out: list[str] = []
    with stored_run(run_dir) as run:
        follow = FromJournal(spec, plan, run.journal if run else None, run.fps if run else {})
        for cell in cells:
            out += show_cell(plan, cell, item, sharing, tok(cell.model), Stage2View(follow, tok, run))
    return "\n".join(out)


PLACEHOLDER = "<answer>"  # stands for the model's answer in a previewed follow-up (never sent)


@dataclass
class StoredRun:
    """``--run RUN_DIR``: its journal and engine fingerprints (model -> fp hash)."""

    path: Path
    journal: Journal
    fps: dict[str, str]


@contextlib.contextmanager
def stored_run(run_dir: str | None) -> Iterator[StoredRun | None]:
    if run_dir is None:
        yield None
        return
    path = Path(run_dir)
    if not (path / RUN_FILE).is_file() or not (path / JOURNAL).is_file():
        raise UsageError(f"--run {run_dir}: not a run directory (no {RUN_FILE} and {JOURNAL})",
                         hint="give the --out folder of an `auditc run` of this spec")
    fps = dict(read_run_file(path).get("fingerprints") or {})
    with Journal(path) as journal:
        yield StoredRun(path, journal, fps)


@dataclass
class Stage2View:
    """What `show` needs to preview an item's follow-ups: the one builder (``FromJournal``), the
    tokenizer of any model (a judge's too) and the ``--run`` whose stored answers to use."""

    follow: FromJournal
    tok: Callable[[str], tuple[Any, str, dict]]
    run: StoredRun | None = None


AXES = ("audit", "model", "dataset", "variant", "protocol", "evaluator")  # the parts of a cell id


def no_match_hint(pattern: str, cells) -> str:
    """Did-you-mean for a cell id or glob: the first part (audit/model/...) that matches no cell's,
    else the closest whole cell ids."""
    ids = [c.id for c in cells]
    if not ids:
        return "this spec plans no cells"
    parts = pattern.split("/")
    if len(parts) != len(AXES):  # a '*' may span several parts: only the leading literal ones are placed
        parts = parts[:next((i for i, p in enumerate(parts) if any(ch in p for ch in "*?[")), len(parts))]
        parts = parts[:len(AXES)] if len(parts) < len(pattern.split("/")) else []
    if parts:
        for axis, part in zip(AXES, parts):
            values = sorted({getattr(c, axis) for c in cells})
            if not any(fnmatch.fnmatchcase(v, part) for v in values):
                return f"no {axis} matches {part!r}: " + (did_you_mean(part, values, axis + "s") or "")
    every = sorted({getattr(c, a) for c in cells for a in AXES})
    for part in pattern.split("/"):  # a literal part that is no audit, model, dataset, ... of the spec
        if part and not any(ch in part for ch in "*?[") and part not in every:
            return f"{part!r} is no audit, model, dataset, variant, protocol or evaluator of these cells: " + (
                did_you_mean(part, every) or "")
    return (did_you_mean(pattern, ids, "cells") or "") + " (cell ids are AUDIT/MODEL/DATASET/VARIANT/PROTOCOL/EVALUATOR; " \
        "`auditc plan SPEC --cells` lists them)"


def cells_by_request(plan) -> dict[str, list[str]]:
    """Request id -> the ids of every (test-split) cell whose stage 1 sends it."""
    by_unit: dict[tuple, list] = {}
    for c in plan.cells:
        by_unit.setdefault((c.audit, c.model, c.dataset, c.variant, c.protocol), []).append(c.id)
    out: dict[str, list[str]] = {}
    for (aid, mid, dsid, vid, split), unit in plan.units.items():
        if split != "test":
            continue
        for pid, per_item in unit.stage1.items():
            cids = by_unit.get((aid, mid, dsid, vid, pid), [])
            for reqs in per_item:
                for r in reqs.values():
                    lst = out.setdefault(r.id, [])
                    lst.extend(c for c in cids if c not in lst)
    return out


def show_cell(plan, cell, item: int, sharing: dict[str, list[str]], tok: tuple[Any, str, dict],
              stage2: Stage2View | None = None) -> list[str]:
    unit = plan.units[(cell.audit, cell.model, cell.dataset, cell.variant, "test")]
    per_item = unit.stage1.get(cell.protocol, [])
    if item >= len(per_item):
        raise UsageError(f"--item {item}: cell {cell.id} has {len(per_item)} item(s) (0..{len(per_item) - 1})")
    ctx = unit.contexts[item]
    tokenizer, source, template_kwargs = tok
    lines = [f"cell {cell.id}",
             f"  item {item} of {len(per_item)} sampled (dataset row {ctx.index}, id {ctx.item.get('id')!r})",
             f"  model {cell.model} ({'chat' if ctx.model.chat else 'raw text'} prompts): {source}"]
    roles: dict[str, list[str]] = {}
    reqs = {}
    for role, r in per_item[item].items():
        roles.setdefault(r.id, []).append(role)
        reqs[r.id] = r
    for rid, r in reqs.items():
        others = [c for c in sharing.get(rid, []) if c != cell.id]
        lines += ["", f"  request {rid} (role{'s' if len(roles[rid]) > 1 else ''} {', '.join(roles[rid])})",
                  f"    kind: {r.kind}",
                  f"    params: {', '.join(f'{k}={_param(v)}' for k, v in r.params) or 'none'}",
                  f"    seed: {r.seed}"]
        if others:
            lines.append(f"    shared with {len(others)} other cell(s):")
            lines += [f"      {c}" for c in others[:MAX_SHARED]]
            if len(others) > MAX_SHARED:
                lines.append(f"      ... and {len(others) - MAX_SHARED} more")
        else:
            lines.append("    shared with no other cell")
        head, text = render_prompt(r.prompt, tokenizer, template_kwargs)
        lines.append(f"    prompt ({head}):")
        lines += [f"    │{ln}" for ln in text.split("\n")]
        if stage2 is not None and stage2.run is not None:
            lines += stored_lines(stage2.run, r)
    dev = plan.units.get((cell.audit, cell.model, cell.dataset, cell.variant, "dev"))
    if dev is not None and dev.stage1.get(cell.protocol):
        n_dev = len({r.id for reqs in dev.stage1[cell.protocol] for r in reqs.values()})
        lines += ["", f"  dev split: {n_dev} more request(s) on {len(dev.stage1[cell.protocol])} dev item(s) "
                      "(the protocol fits or prompts with them), not shown"]
    follow = followups(plan, cell)
    shown: set[str] = set()
    if stage2 is not None:
        built, how = preview_followups(stage2, cell, ctx, per_item[item])
        if built:
            lines += ["", f"  follow-ups (stage 2) as the run builds them from the answer; {how}:"]
        for role, (r, note) in built.items():
            shown.add(role)
            rtok, rsource, rkwargs = stage2.tok(r.model)
            lines += ["", f"  request {r.id} (role {role}, model {r.model})",
                      f"    built from: {note}",
                      f"    kind: {r.kind}",
                      f"    params: {', '.join(f'{k}={_param(v)}' for k, v in r.params) or 'none'}",
                      f"    seed: {r.seed}"]
            if r.model != cell.model:
                lines.append(f"    tokenizer: {rsource}")
            head, text = render_prompt(r.prompt, rtok, rkwargs)
            lines.append(f"    prompt ({head}):")
            lines += [f"    │{ln}" for ln in text.split("\n")]
            if stage2.run is not None and note.startswith("the stored answer"):
                lines += stored_lines(stage2.run, r)
    rest = [f for f in follow if f[2] not in shown and not any(f[2] == role.split(":", 1)[0] for role in shown)]
    if rest:
        lines += ["", "  follow-ups (built at run time from the answer):" if not shown else
                  "  other follow-ups (built at run time, not previewed):"]
        lines += [f"    {role}: {kind} (model {model}, from {source})" for model, source, role, kind in rest]
    lines.append("")
    return lines


def _stand_ins(reqs: dict[str, Request], text: str) -> dict[str, Result]:
    """Role -> a stand-in result of each stage-1 request whose generations are ``text``."""
    return {role: Result(request_id=r.id, kind=r.kind,
                         samples=[Sample(text, [], "stop")] * max(1, int(r.p.get("n", 1) or 1))
                         if r.kind == "generate" else None) for role, r in reqs.items()}


def _mine(built: dict[str, Request], eid: str) -> dict[str, Request]:
    """The follow-ups a cell reads: its protocol's, and its own evaluator's (not the other evaluators')."""
    return {role: r for role, r in built.items() if not role.startswith(EVALUATOR_ROLES)
            or role in (f"constrained:{eid}", f"judge:{eid}") or role.startswith(f"loglik:{eid}:")}


def _shows(r: Request, text: str) -> bool:
    p = r.prompt
    sent = p.text if p.text is not None else "\n".join(m.content for m in p.messages or ())
    return text in sent or text in repr(r.params)


def preview_followups(stage2: Stage2View, cell, ctx, reqs: dict[str, Request]) -> tuple[dict[str, tuple[Request, str]], str]:
    """Role -> (follow-up request, what it was built from) of one item of ``cell``, built by
    ``FromJournal.item`` (the run's own builder) from: the stored stage-1 results of ``--run``
    when it has them all, else the placeholder answer ``<answer>``, else (a follow-up built from
    the evaluator's reading of the answer, which the placeholder has none of) the gold answer."""
    f, eid = stage2.follow, cell.evaluator
    if stage2.run is not None:
        got = {role: stage2.run.journal.get(r.id, stage2.run.fps.get(cell.model, "")) for role, r in reqs.items()}
        bad = next((f"{role}: {'no stored result' if v is None else 'failed: ' + str(v.error)}"
                    for role, v in got.items() if v is None or v.error is not None), None)
        if bad is None:
            built = _mine(f.item(cell.audit, cell.protocol, ctx, got), eid)
            return {role: (r, f"the stored answer in {stage2.run.path}") for role, r in built.items()}, \
                f"from the answers stored in {stage2.run.path}"
        why = f"--run {stage2.run.path} holds no usable answer for this item ({bad}); "
    else:
        why = ""
    out = {role: (r, f"the placeholder answer {PLACEHOLDER}") for role, r in
           _mine(f.item(cell.audit, cell.protocol, ctx, _stand_ins(reqs, PLACEHOLDER)), eid).items()
           if _shows(r, PLACEHOLDER)}
    gold = ctx.item.get("gold_label") if ctx.labels else ctx.item.get("answer")
    if gold not in (None, ""):
        for role, r in _mine(f.item(cell.audit, cell.protocol, ctx, _stand_ins(reqs, str(gold))), eid).items():
            if role not in out:
                out[role] = (r, f"the item's gold answer {str(gold)!r} standing in for the model's answer (this "
                                f"follow-up shows the answer as the evaluator reads it, and {PLACEHOLDER} reads as none)")
    return out, why + f"{PLACEHOLDER} stands for the model's answer (a placeholder: no model was run)"


def stored_lines(run: StoredRun, r: Request) -> list[str]:
    """The stored result of ``r`` in ``--run``'s journal, as `show` prints it."""
    res = run.journal.get(r.id, run.fps.get(r.model, ""))
    if res is None:
        return [f"    stored answer: none in {run.path} (the run did not send this request)"]
    if res.error is not None:
        return [f"    stored answer: the request failed: {res.error}"]
    if res.samples is not None:
        out = []
        for i, smp in enumerate(res.samples):
            out.append("    stored answer" + (f" (sample {i})" if len(res.samples) > 1 else "") + ":")
            out += [f"    │{ln}" for ln in (smp.text or "").split("\n")]
        return out
    if res.choice is not None:
        return [f"    stored answer: forced choice {res.choice!r}"]
    if res.choice_logprobs:
        return ["    stored answer: label logprobs " + ", ".join(f"{k!r}: {v:.4f}" for k, v in res.choice_logprobs.items())]
    if res.continuation is not None:
        return [f"    stored answer: {len(res.continuation)} continuation token(s), "
                f"sum logprob {sum(t.logprob for t in res.continuation):.4f}"]
    return ["    stored answer: stored (no text)"]


def _param(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(list(v) if isinstance(v, tuple) else v)


def followups(plan, cell) -> list[tuple[str, str, str, str]]:
    """(model, source, role, kind) of the stage-2 requests this cell's items lead to."""
    sources = {cell.protocol: True, f"cross:{cell.protocol}": True, cell.evaluator: False}
    out = []
    for d in plan.deferred:
        own = sources.get(d["source"])
        if own is None or (own and d["model"] != cell.model):
            continue
        key = (d["model"], d["source"], d["role"], d["kind"])
        if key not in out:
            out.append(key)
    return out


def render_prompt(prompt, tokenizer, template_kwargs: dict[str, Any]) -> tuple[str, str]:
    """(a heading saying how it was rendered, the text)."""
    if prompt.text is not None:
        if tokenizer is None:
            return "raw text; without a tokenizer the special tokens it adds and the token count are not shown", prompt.text
        ids = tokenizer(prompt.text, add_special_tokens=True)["input_ids"]
        plain = tokenizer(prompt.text, add_special_tokens=False)["input_ids"]
        added = list(tokenizer.convert_ids_to_tokens(ids[:len(ids) - len(plain)])) if ids[len(ids) - len(plain):] == plain else []
        extra = f"; the tokenizer adds {' '.join(added)} in front" if added else ""
        return f"raw text, {len(ids)} tokens{extra}", prompt.text
    msgs = [{"role": m.role, "content": m.content} for m in prompt.messages or ()]
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if tokenizer is None or not template:
        why = "no tokenizer" if tokenizer is None else "its tokenizer has no chat template"
        cont = "; the last assistant message is continued" if prompt.continue_final else ""
        return (f"chat messages as role-tagged text: {why}, so no chat template applied{cont}",
                "\n".join(f"[{m['role']}] {m['content']}" for m in msgs))
    from auditlang.engines.params import apply_chat  # lazy: engine modules only for the command that needs a tokenizer

    cf = prompt.continue_final
    text = apply_chat(tokenizer, msgs, cf, template_kwargs)  # as the engines render it
    n = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    how = "continuing the assistant message" if cf else "with the generation prompt"
    return f"chat template applied {how}, {n} tokens", text


def local_tokenizer(spec, mid: str) -> tuple[Any, str, dict[str, Any]]:
    """(tokenizer or None, where it came from or why there is none, chat-template kwargs) of
    spec model ``mid``. Only tokenizer files are read: no weights, no conversion, no download."""
    from auditlang.engines import embedded  # lazy: engine modules only for the command that needs a tokenizer
    from auditlang.engines.params import chat_template_kwargs  # lazy: engine modules only for the command that needs a tokenizer

    config = model_config(spec, mid)
    try:
        kwargs = chat_template_kwargs(config.options, config.name)
    except ValueError:
        kwargs = {}
    if config.engine == "openai":
        return None, "no tokenizer: an OpenAI-compatible server applies its own chat template to these messages", kwargs
    extra: dict[str, Any] = {}
    if embedded.is_embedded(config.path):
        try:
            d = embedded.checkpoint_dir(config.path)
        except Exception as e:  # noqa: BLE001  (the embedded package is missing: no tokenizer, said so)
            return None, f"no tokenizer available locally ({e})", kwargs
        if embedded.read_provenance(d) is None or not (d / "config.json").is_file():
            return None, (f"no tokenizer available locally (embedded {config.path!r} is not converted yet; "
                          "`auditc run` converts it once)"), kwargs
        where, what = str(d), f"tokenizer of the converted embedded checkpoint {config.path!r}"
    else:
        p = Path(config.path).expanduser()
        if p.is_file() and p.suffix == ".gguf":
            where, what, extra = str(p.parent), f"tokenizer read from {p.name}", {"gguf_file": p.name}
        elif p.is_dir():
            where, what = str(p), f"tokenizer of {config.path}"
        else:
            where, what = config.path, f"tokenizer of {config.path} from the local Hugging Face cache"
            extra = {"local_files_only": True, "revision": config.revision}
            if not _in_hub_cache(config.path, config.revision):  # known before transformers' import (seconds)
                return None, f"no tokenizer available locally ({config.path} is not in the local Hugging Face cache)", kwargs
    try:
        from transformers import AutoTokenizer  # lazy: transformers only when a tokenizer is read

        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=bool(config.options.get("trust_remote_code")),
                                            **{k: v for k, v in extra.items() if v is not None})
    except ImportError:
        return None, "no tokenizer available locally (transformers is not installed)", kwargs
    except Exception as e:  # noqa: BLE001  (not in the cache, unreadable files: shown as messages, said so)
        return None, f"no tokenizer available locally ({type(e).__name__})", kwargs
    return tok, what + " (no weights loaded)", kwargs


def _in_hub_cache(repo: str, revision: str | None) -> bool:
    """Whether the local Hugging Face cache holds a tokenizer file of ``repo`` (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: only for a Hub model's tokenizer

        return any(isinstance(try_to_load_from_cache(repo, name, revision=revision), str)
                   for name in ("tokenizer_config.json", "tokenizer.json"))
    except Exception:  # noqa: BLE001  (no huggingface_hub, a repo id it rejects: transformers decides)
        return True
