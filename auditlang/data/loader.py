"""Load a declared dataset into normalised items and draw the study-000 sample.

Where data lives is a setting: ``--data-root`` on the command line, else the environment
variable ``AUDITLANG_DATA_ROOT``, else ``settings { data_root = ... }`` in the spec (relative to
the spec), else the spec's own folder. A relative dataset path is looked up under the data root.

Every item is normalised to the keys prompts and evaluators read: ``id``, ``question``,
``choices`` (list or None), ``answer`` (gold text), ``answer_index`` (or None), ``aliases``
(list or None), plus every other field of the source row. Field names may be dotted paths into
nested columns (``choices="choices.text"``). Files and Hub splits share one code path after
reading: filter, normalise, sample.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.prompts.sampling import sample_indices
from auditlang.resolve.spec import Resolved, Spec

ENV_DATA_ROOT = "AUDITLANG_DATA_ROOT"


class DataError(Exception):
    """A user-facing data problem, with the file and (where known) the line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.file, self.line, self.hint = file, line, hint


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
    n_drawn: int | None = None  # the sample size before `--limit` cut it (None: no limit)

    @property
    def sample(self) -> list[dict[str, Any]]:
        return [self.items[i] for i in self.indices]


def data_root_for(spec: Spec, cli_root: str | None = None) -> Path:
    if cli_root:
        return Path(cli_root).expanduser().resolve()
    env = os.environ.get(ENV_DATA_ROOT)
    if env:
        return Path(env).expanduser().resolve()
    s = spec.settings
    if s.data_root:
        p = Path(s.data_root).expanduser()
        return (p if p.is_absolute() else spec.entry.parent / p).resolve()
    return spec.entry.parent


def locate(ds: Resolved, root: Path, spec: Spec) -> Path | None:
    p = Path(ds.value.path).expanduser()
    if p.is_absolute():
        return p if p.exists() else None
    for base in (root, spec.entry.parent):
        if (base / p).exists():
            return (base / p).resolve()
    return None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("r", encoding="utf-8", errors="strict") as fh:
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"malformed JSON: {e.msg} (column {e.colno})", str(path), n,
                                    hint="each line must be one JSON object") from None
                if not isinstance(obj, dict):
                    raise DataError(f"expected a JSON object, got {type(obj).__name__}", str(path), n)
                obj["__line__"] = n
                rows.append(obj)
        except UnicodeDecodeError as e:
            raise DataError(f"file is not valid UTF-8 ({e.reason})", str(path)) from None
    return rows


def _read_csv(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open("r", encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        for n, row in enumerate(reader, 2):
            out: dict[str, Any] = {}
            for k, v in row.items():
                if k is None:
                    raise DataError("row has more cells than the header", str(path), n)
                if isinstance(v, str) and v[:1] in "[{":
                    try:
                        v = json.loads(v)
                    except json.JSONDecodeError:
                        pass
                out[k] = v
            out["__line__"] = n
            rows.append(out)
    return rows


_MISSING = object()


def field_value(row: dict[str, Any], name: str) -> Any:
    """``row[name]``, or for a dotted path the nested value (``choices.text``); _MISSING if absent."""
    if name in row:
        return row[name]
    cur: Any = row
    for part in name.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
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
    choices = need(v.choices, v.task != "open_qa")
    if choices is not None and not isinstance(choices, list):
        raise DataError(f"field '{v.choices}' must be a list, got {type(choices).__name__}", path, line)
    item["choices"] = choices
    gold_index = need(v.gold_index, False)
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
        if not isinstance(gold_index, int) or not 0 <= gold_index < len(choices):
            raise DataError(f"gold index {gold_index!r} is not a valid index into {len(choices)} choices", path, line)
        if gold is None:
            gold = choices[gold_index]
    item["answer"] = gold
    item["answer_index"] = gold_index
    aliases = need(v.aliases, False)
    item["aliases"] = aliases if isinstance(aliases, list) else None
    return item


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
                 meta: dict[str, Any] | None = None) -> DatasetItems:
    """Read, normalise and sample one dataset. Raises :class:`DataError` for user problems.
    ``file``: read these rows (JSON lines, or CSV for a csv dataset) instead of locating the
    declared file or hub split -- a run directory's copy; ``meta`` is then the identity recorded
    when it was first read (hub revision and hashes)."""
    ds = spec.get(ds_id)
    meta = dict(meta or {})
    raw: list[dict[str, Any]] | None = None
    if ds.ctor == "hub" and file is None:
        from auditlang.data.hub import HubError, read_hub  # lazy: `datasets` is an optional extra

        where = f"hub:{ds.value.id_}/{ds.value.split}"
        try:
            rows, meta = read_hub(ds)
        except HubError as e:
            raise DataError(str(e), None, None, hint=e.hint) from None
        raw = rows
    else:
        path = file if file is not None else locate(ds, root, spec)
        if path is None:
            raise DataError(f"data file '{ds.value.path}' not found under the data root {root}", None, None,
                            hint=f"pass --data-root DIR or set {ENV_DATA_ROOT}")
        where = str(path)
        try:
            rows = _read_csv(path) if ds.ctor == "csv" else _read_jsonl(path)
        except OSError as e:
            raise DataError(f"cannot read data file: {e.strerror}", str(path)) from None
    if not rows:
        raise DataError("the dataset has no rows" if ds.ctor == "hub" else "data file has no rows", where)
    rows = _filter(rows, ds, where)
    items = [normalise(r, ds, where, i) for i, r in enumerate(rows)]
    if ds.value.sample_per:
        indices = stratified_indices(rows, ds)
    else:
        indices = sample_indices(len(items), ds.value.sample or len(items), ds.value.seed)
    return DatasetItems(ds_id, where, items, indices, meta=meta, raw_rows=raw)


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
