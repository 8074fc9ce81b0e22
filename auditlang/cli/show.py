"""`auditc show SPEC CELL_OR_PATTERN`: the exact prompts a cell sends for one item, before any GPU time.

For every matching cell: each stage-1 request of the chosen item (kind, parameters, seed, request
id, the roles that use it and the other cells sharing it), its prompt as the model receives it
(chat template applied with the model's tokenizer only; no weights are loaded), and the follow-up
roles that are built at run time from the answer (``plan.deferred``).
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any

from auditlang.api import plan_spec
from auditlang.cli.common import EXIT_OK, StepLog, parse_limit, parse_model_args, print_diags, print_overrides
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UsageError
from auditlang.core.terminal import visible
from auditlang.execute.access import load_allowances, not_downloaded, run_access, withhold_hub_token
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
    print(visible(show_text(spec, plan, args.cell, args.item, spec_name=args.spec)))
    return EXIT_OK


def show_plan(spec, data_root=None, limit=None, allow_hosts=(), allow_secrets=(), step=None):
    """The plan `auditc show` reads: a Hub dataset whose host is not allowed is read from the
    local cache (else its fallback file); nothing is downloaded."""
    allow = load_allowances(list(allow_hosts), list(allow_secrets))
    with withhold_hub_token(allow):
        return plan_spec(spec, None if data_root is None else str(data_root), limit, step=step,
                         no_download=not_downloaded(run_access(spec), allow))


def show_text(spec, plan, pattern: str, item: int = 0, spec_name: str | None = None) -> str:
    """What `auditc show` prints for the cells matching ``pattern`` (``auditlang.show``)."""
    cells = [c for c in plan.cells if fnmatch.fnmatchcase(c.id, pattern)]
    if not cells:
        raise UsageError(f"no cell of {spec_name or spec.entry.name} matches {pattern!r}",
                         hint=no_match_hint(pattern, plan.cells))
    if item < 0:
        raise UsageError(f"--item {item}: expected a position >= 0 in the sampled items")
    sharing = cells_by_request(plan)
    tokenizers: dict[str, tuple[Any, str, dict]] = {}
    out: list[str] = []
    for cell in cells:
        if cell.model not in tokenizers:
            tokenizers[cell.model] = local_tokenizer(spec, cell.model)
        out += show_cell(plan, cell, item, sharing, tokenizers[cell.model])
    return "\n".join(out)


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


def show_cell(plan, cell, item: int, sharing: dict[str, list[str]], tok: tuple[Any, str, dict]) -> list[str]:
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
    dev = plan.units.get((cell.audit, cell.model, cell.dataset, cell.variant, "dev"))
    if dev is not None and dev.stage1.get(cell.protocol):
        n_dev = len({r.id for reqs in dev.stage1[cell.protocol] for r in reqs.values()})
        lines += ["", f"  dev split: {n_dev} more request(s) on {len(dev.stage1[cell.protocol])} dev item(s) "
                      "(the protocol fits or prompts with them), not shown"]
    follow = followups(plan, cell)
    if follow:
        lines += ["", "  follow-ups (built at run time from the answer):"]
        lines += [f"    {role}: {kind} (model {model}, from {source})" for model, source, role, kind in follow]
    lines.append("")
    return lines


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
    try:
        from transformers import AutoTokenizer  # lazy: transformers only when a tokenizer is read

        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=bool(config.options.get("trust_remote_code")),
                                            **{k: v for k, v in extra.items() if v is not None})
    except ImportError:
        return None, "no tokenizer available locally (transformers is not installed)", kwargs
    except Exception as e:  # noqa: BLE001  (not in the cache, unreadable files: shown as messages, said so)
        return None, f"no tokenizer available locally ({type(e).__name__})", kwargs
    return tok, what + " (no weights loaded)", kwargs
