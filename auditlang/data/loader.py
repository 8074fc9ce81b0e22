"""Load a declared dataset into normalised items and draw the study-000 sample.

Where data lives is a setting: ``--data-root`` on the command line, else the environment
variable ``AUDITLANG_DATA_ROOT``, else ``settings { data_root = ... }`` in the spec (relative to
the spec), else the spec's own folder. A relative dataset path is looked up under the data root.

Every item is normalised to the keys prompts and evaluators read: ``id``, ``question``,
``choices`` (list or None), ``answer`` (gold text), ``answer_index`` (or None), ``aliases``
(list or None), plus every other field of the source row.
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


def normalise(row: dict[str, Any], ds: Resolved, path: str, idx: int) -> dict[str, Any]:
    v = ds.value
    line = row.get("__line__")

    def need(field_name: str | None, required: bool) -> Any:
        if field_name is None:
            return None
        if field_name not in row:
            if required:
                raise DataError(f"row has no field '{field_name}' (dataset '{ds.id}' maps it)", path, line,
                                hint=f"fields present: {', '.join(k for k in row if k != '__line__')}")
            return None
        return row[field_name]

    item = {k: val for k, val in row.items() if k != "__line__"}
    item["id"] = str(need(v.id, False) if v.id in row else f"{ds.id}_{idx}")
    item["question"] = need(v.question, True)
    choices = need(v.choices, v.task != "open_qa")
    if choices is not None and not isinstance(choices, list):
        raise DataError(f"field '{v.choices}' must be a list, got {type(choices).__name__}", path, line)
    item["choices"] = choices
    gold_index = need(v.gold_index, False)
    gold = need(v.gold, gold_index is None)
    if choices is not None:
        if gold_index is None and gold in choices:
            gold_index = choices.index(gold)
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
    out = [r for r in rows if r.get(v.filter_field) in keep]
    if not out:
        seen = sorted({str(r.get(v.filter_field)) for r in rows})[:10]
        raise DataError(f"no row has {v.filter_field} in {sorted(map(str, keep))}", path,
                        hint=f"values present include: {', '.join(seen)}")
    return out


def load_dataset(spec: Spec, ds_id: str, root: Path) -> DatasetItems:
    """Read, normalise and sample one dataset. Raises :class:`DataError` for user problems."""
    ds = spec.get(ds_id)
    if ds.ctor == "hub":
        return _load_hub(ds)
    path = locate(ds, root, spec)
    if path is None:
        raise DataError(f"data file '{ds.value.path}' not found under the data root {root}", None, None,
                        hint=f"pass --data-root DIR or set {ENV_DATA_ROOT}")
    try:
        rows = _read_jsonl(path) if ds.ctor == "jsonl" else _read_csv(path)
    except OSError as e:
        raise DataError(f"cannot read data file: {e.strerror}", str(path)) from None
    if not rows:
        raise DataError("data file has no rows", str(path))
    rows = _filter(rows, ds, str(path))
    items = [normalise(r, ds, str(path), i) for i, r in enumerate(rows)]
    if ds.value.sample_per:
        return DatasetItems(ds_id, str(path), items, stratified_indices(rows, ds))
    n = ds.value.sample or len(items)
    indices = sample_indices(len(items), n, ds.value.seed)
    return DatasetItems(ds_id, str(path), items, indices)


def stratified_indices(rows: list[dict[str, Any]], ds: Resolved) -> list[int]:
    """``sample_per``: for each ``filter_in`` value in order, ``random.Random(seed).sample`` of
    ``min(size, available)`` of its rows (all of them, in file order, when no more are available)."""
    v = ds.value
    out: list[int] = []
    for value, size in zip(v.filter_in, v.sample_per):
        stratum = [i for i, r in enumerate(rows) if r.get(v.filter_field) == value]
        out += [stratum[j] for j in sample_indices(len(stratum), size, v.seed)]
    return out


def stratified_counts(rows: list[dict[str, Any]], ds: Resolved) -> list[tuple[Any, int, int]]:
    """(value, requested, drawn) per ``filter_in`` value of a ``sample_per`` dataset."""
    v = ds.value
    return [(value, size, min(size, sum(1 for r in rows if r.get(v.filter_field) == value)))
            for value, size in zip(v.filter_in, v.sample_per)]


def _load_hub(ds: Resolved) -> DatasetItems:
    try:
        import datasets  # type: ignore
    except ImportError:
        raise DataError(f"dataset '{ds.id}' is a Hugging Face hub dataset but `datasets` is not installed", None, None,
                        hint="pip install datasets") from None
    try:
        split = datasets.load_dataset(ds.value.id_, ds.value.config, split=ds.value.split)
    except Exception as e:  # network or hub failure
        raise DataError(f"cannot load hub dataset '{ds.value.id_}' ({type(e).__name__}: {e})", None, None,
                        hint="the hub may be unreachable; download it and declare it with jsonl(...)") from None
    rows = _filter([dict(r) for r in split], ds, ds.value.id_)
    items = [normalise(r, ds, ds.value.id_, i) for i, r in enumerate(rows)]
    if ds.value.sample_per:
        return DatasetItems(ds.id, f"hub:{ds.value.id_}/{ds.value.split}", items, stratified_indices(rows, ds))
    n = ds.value.sample or len(items)
    return DatasetItems(ds.id, f"hub:{ds.value.id_}/{ds.value.split}", items, sample_indices(len(items), n, ds.value.seed))


def estimated_size(ds: Resolved) -> int | None:
    """Sample size to plan with when the data is not available locally."""
    v = ds.value
    if v.sample:
        return v.sample
    if v.sample_per:
        return sum(v.sample_per)
    return getattr(v, "size", None)
