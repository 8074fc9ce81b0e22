"""Load a declared dataset into normalised items and draw the study-000 sample.

Where data lives is a setting: ``--data-root`` on the command line, else the environment
variable ``AUDITLANG_DATA_ROOT``, else ``settings { data_root = ... }`` in the spec (relative to
the spec), else the spec's own folder. A relative dataset path is looked up under the data root.

Every item is normalised to the keys prompts and evaluators read: ``id``, ``question``,
``choices`` (list or None), ``answer`` (gold text), ``answer_index`` (or None), ``aliases``
(list or None), plus every other field of the source row. Field names may be dotted paths into
nested columns (``choices="choices.text"``). Files and Hub splits share one code path after
reading: filter, normalise, sample. A Hub dataset declaring ``fallback=jsonl(...)`` is read from
that file, with the fallback's own mapping, when its split is not available offline; the items
record which source was read (``meta["source"]``, ``note``).
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.core.confine import ENV_DATA_ROOT, inside, outside_hint, user_data_roots
from auditlang.core.errors import UserError
from auditlang.core.hashing import sha256_file
from auditlang.data.hub import HubError, read_hub
from auditlang.prompts.sampling import sample_indices
from auditlang.resolve.spec import Resolved, Spec

MAX_WARNED = 5  # example lines shown per data warning


class DataError(UserError):
    """A user-facing data problem, with the file and (where known) the line. ``decl``: the
    declaration it belongs to when that is not the dataset itself (a hub dataset's fallback)."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None, hint: str | None = None,
                 decl: str | None = None) -> None:
        super().__init__(message, hint)
        self.file, self.line, self.decl = file, line, decl


class ConfinementError(DataError):
    """A data path that leaves the project root and the user's data roots (docs/security.md).
    ``param``: the spec parameter that named it (``path`` of a dataset, ``data_root`` of settings)."""

    def __init__(self, message: str, param: str, hint: str | None = None, decl: str | None = None) -> None:
        super().__init__(message, None, None, hint, decl)
        self.param = param


@dataclass
class DatasetItems:
    """A loaded dataset: all rows, and the sampled indices every cell reuses."""

    dataset_id: str
    path: str
    items: list[dict[str, Any]]  # normalised, all rows
    indices: list[int]  # the sample (study 000: random.Random(seed).sample(range(n), N))
    dev_indices: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # what identifies the data (hub: revision, commit, hashes)
    raw_rows: list[dict[str, Any]] | None = field(default=None, repr=False)  # hub rows as read (stored in run dirs)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (code, message): see data_warnings()
    n_drawn: int | None = None  # the sample size before `--limit` cut it (None: no limit)
    note: str | None = None  # which source was read, when a hub dataset has a fallback (plan notes)
    decl: str | None = None  # the declaration read (the dataset, or its fallback): its dev split applies
    n_source_rows: int | None = None  # rows read from the file or split, before filter_field/filter_in
    file_rows: list[int] | None = None  # each item's 0-based row in the source (None: no filter, the same)

    @property
    def sample(self) -> list[dict[str, Any]]:
        return [self.items[i] for i in self.indices]


def data_root_for(spec: Spec, cli_root: str | None = None) -> Path:
    """The data root: ``--data-root``, else ``$AUDITLANG_DATA_ROOT``, else ``settings { data_root }``
    (which must lie inside the project root: :class:`ConfinementError`), else the spec's folder."""
    if cli_root:
        return Path(cli_root).expanduser().resolve()
    env = os.environ.get(ENV_DATA_ROOT)
    if env:
        return Path(env).expanduser().resolve()
    s = spec.settings
    if s.data_root:
        p = Path(s.data_root)
        got = p if p.is_absolute() else spec.entry.parent / p
        real = inside(got, [spec.root])
        if real is None:
            raise ConfinementError(f"settings data_root '{s.data_root}' resolves to {os.path.realpath(got)}, outside "
                                   f"the project root {spec.root}", "data_root", hint=outside_hint([spec.root]))
        return real
    return spec.entry.parent


def allowed_roots(spec: Spec, root: Path) -> list[Path]:
    """Folders data files may come from: the project root, the data root in force (given by the
    user, or checked by :func:`data_root_for`) and ``$AUDITLANG_DATA_ROOT``."""
    return [spec.root, root, *user_data_roots(None)]


def locate(ds: Resolved, root: Path, spec: Spec) -> Path | None:
    """The dataset's file (symlinks resolved), None when absent; :class:`ConfinementError` when it
    lies outside :func:`allowed_roots`."""
    p = Path(ds.value.path)
    cands = [p] if p.is_absolute() else [root / p, spec.entry.parent / p]
    for cand in cands:
        if cand.exists():
            roots = allowed_roots(spec, root)
            real = inside(cand, roots)
            if real is None:
                raise ConfinementError(f"data file '{ds.value.path}' resolves to {os.path.realpath(cand)}, outside the "
                                       "project root and the data root", "path", hint=outside_hint(roots))
            return real
    return None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("r", encoding="utf-8-sig", errors="strict") as fh:  # a byte-order mark is accepted
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"malformed JSON: {e.msg} (column {e.colno})", str(path), n,
                                    hint="each line must be one JSON object") from None
                except RecursionError:
                    raise DataError("JSON nested too deeply to read", str(path), n,
                                    hint="each line must be one flat JSON object (question, choices, answer, ...)") from None
                except ValueError as e:  # e.g. an integer beyond Python's digit limit
                    raise DataError(f"unreadable JSON value: {e}", str(path), n) from None
                if not isinstance(obj, dict):
                    raise DataError(f"expected a JSON object, got {type(obj).__name__}", str(path), n,
                                    hint="each line must be one JSON object")
                obj["__line__"] = n
                rows.append(obj)
        except UnicodeDecodeError as e:
            raise DataError(f"file is not valid UTF-8 ({e.reason})", str(path), _bad_utf8_line(path),
                            hint="save the file as UTF-8") from None
    return rows


def _bad_utf8_line(path: Path) -> int | None:
    """1-based line of the first byte sequence that is not UTF-8."""
    try:
        data = path.read_bytes()
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return data.count(b"\n", 0, e.start) + 1
    except OSError:
        pass
    return None


def _read_csv(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("r", encoding="utf-8-sig", newline="") as fh:  # a byte-order mark is accepted
        reader = csv.DictReader(fh)
        try:
            for row in reader:
                out: dict[str, Any] = {}
                if any(v is None for k, v in row.items() if k is not None):  # DictReader pads a short row
                    cells = sum(v is not None for k, v in row.items() if k is not None)
                    header = len(reader.fieldnames or ())
                    raise DataError(f"row has {cells} cell{'s' if cells != 1 else ''}, the header has {header} "
                                    f"({', '.join(reader.fieldnames or ())})", str(path), reader.line_num,
                                    hint="give every row one cell per header column (an empty cell is written as "
                                         "nothing between two commas)")
                for k, v in row.items():
                    if k is None:
                        raise DataError("row has more cells than the header", str(path), reader.line_num,
                                        hint="quote cells that contain commas")
                    if isinstance(v, str) and v[:1] in "[{":
                        try:
                            v = json.loads(v)
                        except (ValueError, RecursionError):
                            pass
                    out[k] = v
                out["__line__"] = reader.line_num
                rows.append(out)
        except UnicodeDecodeError as e:
            raise DataError(f"file is not valid UTF-8 ({e.reason})", str(path), _bad_utf8_line(path),
                            hint="save the file as UTF-8") from None
        except csv.Error as e:
            raise DataError(f"malformed CSV: {e}", str(path), reader.line_num,
                            hint="the first line is the header; quote cells holding commas, quotes or newlines") from None
    return rows


_MISSING = object()


def field_value(row: dict[str, Any], name: str) -> Any:
    """``row[name]``, or for a dotted path the nested value (``choices.text``; a number indexes a
    list: ``turns.0``); _MISSING if absent."""
    if name in row:
        return row[name]
    cur: Any = row
    for part in name.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):  # `turns.0`: a list's item
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def normalise(row: dict[str, Any], ds: Resolved, path: str, idx: int) -> dict[str, Any]:
    v = ds.value
    line = row.get("__line__")

    def need(field_name: str | None, required: bool) -> Any:
        if field_name is None:
            return None
        val = field_value(row, field_name)
        if val is _MISSING:
            if required:
                raise DataError(f"row has no field '{field_name}' (dataset '{ds.id}' maps it)", path, line,
                                hint=f"fields present: {', '.join(_paths(row))}")
            return None
        return val

    item = {k: val for k, val in row.items() if k != "__line__"}
    item["id"] = str(need(v.id, False) if field_value(row, v.id) is not _MISSING else f"{ds.id}_{idx}")
    item["question"] = need(v.question, True)
    choices = list(v.choices) if isinstance(v.choices, list) else need(v.choices, v.task != "open_qa")
    if choices is not None and not isinstance(choices, list):
        raise DataError(f"field '{v.choices}' must be a list, got {type(choices).__name__}", path, line,
                        hint="write the choices as a JSON list, e.g. [\"a\", \"b\"] (map another field with choices=)")
    item["choices"] = choices
    gold_index = need(v.gold_index, False)
    if ds.ctor == "csv":  # CSV cells are text: the index column as the schema says (an integer; empty = none)
        gold_index = _csv_int(gold_index)
    gold = need(v.gold, gold_index is None)
    labels = need(v.labels, True) if isinstance(v.labels, str) else v.labels
    if choices is not None:
        if gold_index is None and gold in choices:
            gold_index = choices.index(gold)
        elif gold_index is None and labels is not None:  # the gold is an option label (ARC's answerKey)
            if not isinstance(labels, list) or len(labels) != len(choices):
                raise DataError(f"labels {labels!r} must be a list with one label per choice ({len(choices)})", path, line)
            if str(gold) in [str(lab) for lab in labels]:
                gold_index, gold = [str(lab) for lab in labels].index(str(gold)), None
        if gold_index is None and v.gold is None:
            raise DataError(f"row has no gold index (field '{v.gold_index}'), and gold=none names no gold-text field",
                            path, line, hint=f"fields present: {', '.join(_paths(row))}")
        if gold_index is None:
            raise DataError(f"gold answer {_short(gold)} is not one of the {len(choices)} choices", path, line,
                            hint=f"field '{v.gold}' must equal one choice exactly (or map gold_index= or labels=)")
        if isinstance(gold_index, bool) or not isinstance(gold_index, int) or not 0 <= gold_index < len(choices):
            raise DataError(f"gold index {_short(gold_index)} is not a valid index into {len(choices)} choices", path,
                            line, hint=f"field '{v.gold_index}' must be an integer from 0 to {len(choices) - 1}")
        if gold is None:
            gold = choices[gold_index]
        else:
            _check_gold_agrees(gold, gold_index, choices, labels, v, path, line)
    elif v.gold is None:
        raise DataError(f"gold=none takes the gold from the options, but the row has no field '{v.choices}'", path,
                        line, hint=f"fields present: {', '.join(_paths(row))}")
    item["answer"] = gold
    item["answer_index"] = gold_index
    aliases = need(v.aliases, False)
    item["aliases"] = aliases if isinstance(aliases, list) else None
    return item


def _check_gold_agrees(gold: Any, gold_index: int, choices: list, labels: Any, v: Any, path: str,
                       line: int | None) -> None:
    """A row whose gold text names another choice (or another option label) than its gold index
    contradicts itself: a DataError naming the row, never a silent pick of one of the two."""
    if _hashable(gold) and gold in choices and choices[gold_index] != gold:
        named = choices.index(gold)
        what = f"choice {named} ({_short(gold)})"
    elif isinstance(labels, list) and len(labels) == len(choices) and gold not in choices \
            and str(gold) in [str(lab) for lab in labels] and str(labels[gold_index]) != str(gold):
        named = [str(lab) for lab in labels].index(str(gold))
        what = f"the option labelled {_short(gold)} (choice {named})"
    else:
        return
    raise DataError(f"the row contradicts itself: '{v.gold}' {_short(gold)} is {what}, but '{v.gold_index}' is "
                    f"{gold_index} ({_short(choices[gold_index])})", path, line,
                    hint="fix the row so both name the same choice, or map only one of them "
                         "(gold_index=none or gold=none in the dataset declaration)")


def _csv_int(cell: Any) -> Any:
    """A CSV cell holding an integer (``"1"``, `` 2 ``) as an int, an empty cell as None;
    anything else unchanged (then reported as not a valid index)."""
    if isinstance(cell, str):
        text = cell.strip()
        if not text:
            return None
        if re.fullmatch(r"[+-]?\d{1,18}", text):
            return int(text)
    return cell


def _filter(rows: list[dict[str, Any]], ds: Resolved, path: str) -> list[dict[str, Any]]:
    """Keep rows whose ``filter_field`` is in ``filter_in`` (applied before sampling)."""
    v = ds.value
    if not v.filter_field:
        return rows
    if v.filter_in is None:
        raise DataError(f"dataset '{ds.id}' sets filter_field but not filter_in", path)
    keep = set(v.filter_in)
    vals = [field_value(r, v.filter_field) for r in rows]
    out = [r for r, x in zip(rows, vals) if x is not _MISSING and _hashable(x) and x in keep]
    if not out:
        seen = sorted({str(x) for x in vals if x is not _MISSING})[:10]
        raise DataError(f"no row has {v.filter_field} in {sorted(map(str, keep))}", path,
                        hint=f"values present include: {', '.join(seen)}")
    return out


def _paths(row: dict[str, Any], prefix: str = "") -> list[str]:
    """Field names of a row, nested columns as dotted paths."""
    out = []
    for k, val in row.items():
        if k == "__line__":
            continue
        out.append(prefix + k)
        if isinstance(val, dict):
            out += _paths(val, prefix + k + ".")
    return out


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def load_dataset(spec: Spec, ds_id: str, root: Path, file: Path | None = None,
                 meta: dict[str, Any] | None = None, no_download: str | None = None) -> DatasetItems:
    """Read, normalise and sample one dataset. Raises :class:`DataError` for user problems.
    ``file``: read these rows (JSON lines, or CSV for a csv dataset) instead of locating the
    declared file or hub split -- a run directory's copy; ``meta`` is then the identity recorded
    when it was first read (hub revision and hashes, or the fallback file read instead).
    ``no_download``: a hub split is read from the local cache only, for this reason; a hub
    dataset with a ``fallback=`` file reads that file when the split is not available offline."""
    ds = spec.get(ds_id)
    meta = dict(meta or {})
    fb = fallback_of(spec, ds)
    if ds.ctor == "hub" and file is None:
        try:
            rows, meta = read_hub(ds, no_download)
        except HubError as e:
            if fb is None or e.unavailable is None:
                hint = e.hint if fb is None else (f"{e.hint}; the fallback file {fb.value.path!r} is read only when "
                                                  "the split is not available offline (HF_DATASETS_OFFLINE=1)")
                raise DataError(str(e), None, None, hint=hint) from None
            return _read_fallback(spec, ds, fb, root, e.unavailable)
        return _items(ds_id, ds, rows, f"hub:{ds.value.id_}/{ds.value.split}", meta, rows, fb)
    if fb is not None and meta.get("source") == "fallback":  # a run directory's copy of the fallback file read
        return _items(ds_id, fb, _read_file(fb, file), str(file), meta, None, fb)
    path = file if file is not None else locate(ds, root, spec)
    if path is None:
        raise DataError(f"data file '{ds.value.path}' not found under the data root {root}", None, None,
                        hint=f"pass --data-root DIR or set {ENV_DATA_ROOT}")
    return _items(ds_id, ds, _read_file(ds, path), str(path), meta, None)


def fallback_of(spec: Spec, ds: Resolved) -> Resolved | None:
    """The fallback file declared for a hub dataset (``hub(..., fallback=jsonl(...))``), or None."""
    fid = getattr(ds.value, "fallback", None)
    return spec.objects.get(fid) if fid else None


def _read_file(ds: Resolved, path: Path) -> list[dict[str, Any]]:
    try:
        return _read_csv(path) if ds.ctor == "csv" else _read_jsonl(path)
    except OSError as e:
        raise DataError(f"cannot read data file: {e.strerror}", str(path), hint="check the file's permissions") from None


def _read_fallback(spec: Spec, hub: Resolved, fb: Resolved, root: Path, why: str) -> DatasetItems:
    """The fallback file of ``hub``, read because the Hub split is not available offline (``why``)."""
    v = hub.value
    what = f"{v.id_!r}" + (f" (config {v.config!r})" if v.config else "") + f", split {v.split!r}"
    try:
        path = locate(fb, root, spec)
    except ConfinementError as e:
        raise ConfinementError(str(e), e.param, e.hint, decl=fb.id) from None
    if path is None:
        raise DataError(f"the Hub split {what} is not available ({why}), and its fallback file '{fb.value.path}' is "
                        f"not found under the data root {root}", None, None, decl=fb.id,
                        hint=f"pass --data-root DIR (or set {ENV_DATA_ROOT}) to the folder holding {fb.value.path}, "
                             "or load the Hub split once with network access")
    try:
        rows = _read_file(fb, path)
    except DataError as e:
        e.decl = fb.id
        raise
    meta = {"source": "fallback", "hub_id": v.id_, "config": v.config, "split": v.split, "revision": v.revision,
            "hub_unavailable": why, "fallback_file": fb.value.path, "sha256": sha256_file(path)}
    return _items(hub.id, fb, rows, str(path), meta, None, fb)


def source_note(meta: dict[str, Any], fb: Resolved | None) -> str | None:
    """The plan note saying which source a hub dataset with a fallback was read from."""
    if fb is None:
        return None
    if meta.get("source") == "fallback":
        return (f"read from its fallback file {meta.get('fallback_file')} (sha256 {meta.get('sha256')}), not from the "
                f"Hub: {meta.get('hub_id')!r} split {meta.get('split')!r} is not available offline "
                f"({meta.get('hub_unavailable')})")
    rev = meta.get("revision")
    return (f"read from the Hub, {meta.get('hub_id')!r} split {meta.get('split')!r} "
            + (f"at revision {rev}" if rev else "(revision not pinned)") + f", commit {meta.get('commit') or 'unknown'}"
            + f"; its fallback file {fb.value.path} was not needed")


def _items(ds_id: str, src: Resolved, rows: list[dict[str, Any]], where: str, meta: dict[str, Any],
           raw: list[dict[str, Any]] | None, fb: Resolved | None = None) -> DatasetItems:
    """Filter, normalise and sample ``rows`` read for dataset ``ds_id`` by the declaration ``src``
    (the dataset itself, or the fallback whose file was read); one code path for every source."""
    try:
        if not rows:
            raise DataError("the dataset has no rows" if src.ctor == "hub" else "data file has no rows", where,
                            hint="point the dataset at a file with one row per item")
        source = rows
        rows = _filter(rows, src, where)
        items = _normalise_all(rows, src, where)
    except DataError as e:
        if src.id != ds_id:
            e.decl = src.id
        raise
    if src.value.sample_per:
        indices = stratified_indices(rows, src)
    else:
        indices = sample_indices(len(items), src.value.sample or len(items), src.value.seed)
    kept = {id(r) for r in rows} if rows is not source else None
    file_rows = [i for i, r in enumerate(source) if id(r) in kept] if kept is not None else None
    return DatasetItems(ds_id, where, items, indices, meta=meta, raw_rows=raw,
                        warnings=data_warnings(rows, items, where), note=source_note(meta, fb), decl=src.id,
                        n_source_rows=len(source), file_rows=file_rows)


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _normalise_all(rows: list[dict[str, Any]], ds: Resolved, path: str) -> list[dict[str, Any]]:
    """Normalise every row; a row problem is raised once, at its first row, with the count of rows
    that have a problem."""
    items, bad = [], []
    for i, r in enumerate(rows):
        try:
            items.append(normalise(r, ds, path, i))
        except DataError as e:
            bad.append(e)
    if bad:
        first = bad[0]
        more = f" ({len(bad)} rows have problems; the first is shown)" if len(bad) > 1 else ""
        raise DataError(f"{first}{more}", first.file, first.line, first.hint)
    return items


def _lines(rows: list[dict[str, Any]]) -> str:
    if any("__line__" not in r for r in rows):  # hub rows: no file lines
        return f"{len(rows)} row(s)"
    shown = [str(r.get("__line__")) for r in rows[:MAX_WARNED]]
    return "line" + ("s " if len(rows) > 1 else " ") + ", ".join(shown) + (", ..." if len(rows) > MAX_WARNED else "")


def _odd(value: Any) -> bool:
    """A value that renders badly in a prompt: NaN/inf, a dict, or a list holding one."""
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return True
    if isinstance(value, list):
        return any(_odd(x) or isinstance(x, list) for x in value)
    return False


def data_warnings(rows: list[dict[str, Any]], items: list[dict[str, Any]], path: str) -> list[tuple[str, str]]:
    """(code, message) of each kind of suspicious data, with counts and example lines:
    W170 empty questions, W171 duplicate ids, W172 duplicate rows, W173 NaN or structured values
    in the fields a prompt shows."""
    out: list[tuple[str, str]] = []
    empty = [r for r, it in zip(rows, items) if it["question"] is None or not str(it["question"]).strip()]
    if empty:
        out.append(("W170", f"{path}: {len(empty)} of {len(items)} row(s) have an empty question ({_lines(empty)})"))
    seen: dict[str, int] = {}
    dup_ids = []
    for r, it in zip(rows, items):
        if it["id"] in seen:
            dup_ids.append(r)
        seen[it["id"]] = 1
    if dup_ids:
        out.append(("W171", f"{path}: {len(dup_ids)} row(s) repeat an id already used ({_lines(dup_ids)}); "
                            "records and per-item results are keyed by id"))
    keys: set[str] = set()
    dup_rows = []
    for r in rows:
        k = json.dumps({a: b for a, b in r.items() if a not in ("__line__", "id")}, sort_keys=True, default=str)
        if k in keys:
            dup_rows.append(r)
        keys.add(k)
    if dup_rows:
        out.append(("W172", f"{path}: {len(dup_rows)} row(s) duplicate an earlier row ({_lines(dup_rows)})"))
    odd = [r for r, it in zip(rows, items) if any(_odd(it[f]) for f in ("question", "choices", "answer"))
           or isinstance(it["question"], (dict, list))]
    if odd:
        out.append(("W173", f"{path}: {len(odd)} row(s) hold NaN, infinity or a structured value (dict or nested "
                            f"list) in the question, choices or answer ({_lines(odd)}); it would be rendered "
                            "into the prompt as Python text"))
    return out


def stratified_indices(rows: list[dict[str, Any]], ds: Resolved) -> list[int]:
    """``sample_per``: for each ``filter_in`` value in order, ``random.Random(seed).sample`` of
    ``min(size, available)`` of its rows (all of them, in file order, when no more are available)."""
    v = ds.value
    vals = [field_value(r, v.filter_field) for r in rows]
    out: list[int] = []
    for value, size in zip(v.filter_in, v.sample_per):
        stratum = [i for i, x in enumerate(vals) if x is not _MISSING and _hashable(x) and x == value]
        out += [stratum[j] for j in sample_indices(len(stratum), size, v.seed)]
    return out


def estimated_size(ds: Resolved) -> int | None:
    """Sample size to plan with when the data is not available locally."""
    v = ds.value
    if v.sample:
        return v.sample
    if v.sample_per:
        return sum(v.sample_per)
    return getattr(v, "size", None)
