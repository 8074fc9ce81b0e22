"""Rows of a Hugging Face Hub split (``hub(ID, SPLIT, config=..., revision=...)``).

Only reading lives here; filters, field mapping and sampling are the loader's, the same code
path as for files. What identifies the data is returned with the rows: the revision asked for,
the commit the rows came from (the ``datasets`` cache folder of a Hub dataset is named after
it), the Arrow fingerprint, and a sha256 of the rows themselves.

Without network access (``HF_DATASETS_OFFLINE=1`` / ``HF_HUB_OFFLINE=1``, or the Hub endpoint
unreachable within a few seconds) the split is read from the local ``datasets`` cache only,
instead of retrying the Hub for a minute.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import socket
import sys
from contextlib import contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from auditlang.resolve.schema import check_hub_id
from auditlang.core.errors import UserError
from auditlang.resolve.spec import Resolved

HUB_HINT_INSTALL = "pip install 'auditlang[hub]'"
_SHA = re.compile(r"[0-9a-f]{7,40}")


class HubError(UserError):
    """A hub split that cannot be read; ``hint`` says what to do. ``unavailable``: why the split
    is not available offline (not installed, offline or unreachable and not in the local cache,
    another commit cached than the one pinned) -- the case a declared ``fallback=`` file covers;
    None for a failure with network access (a wrong id, config or split), which it does not."""

    def __init__(self, message: str, hint: str | None = None, unavailable: str | None = None) -> None:
        super().__init__(message, hint)
        self.unavailable = unavailable


def offline_env() -> bool:
    """Whether the Hub libraries are told to stay offline (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"))


@lru_cache(maxsize=4)
def _reachable(endpoint: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub endpoint opens (probed once per process)."""
    u = urlparse(endpoint)
    try:
        with socket.create_connection((u.hostname or "huggingface.co", u.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


@contextmanager
def _offline(datasets_mod):
    """Offline mode for one call (the libraries read these flags at call time)."""
    import huggingface_hub.constants as hc  # lazy: huggingface_hub only for hub models

    saved = (datasets_mod.config.HF_HUB_OFFLINE, hc.HF_HUB_OFFLINE)
    datasets_mod.config.HF_HUB_OFFLINE = hc.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets_mod.config.HF_HUB_OFFLINE, hc.HF_HUB_OFFLINE = saved


def content_sha256(rows: list[dict[str, Any]]) -> str:
    """sha256 of the rows in order, as canonical JSON (key order and whitespace normalised)."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def _cached_commit(split) -> str | None:
    """The Hub commit a split was prepared from: its cache folder is ``.../VERSION/COMMIT/``."""
    for f in getattr(split, "cache_files", None) or []:
        name = Path(f.get("filename", "")).parent.name
        if re.fullmatch(r"[0-9a-f]{40}", name):
            return name
    return None


def _cache_dirs() -> list[Path]:
    """Where ``datasets`` looks for a split offline: its prepared-split cache and the Hub download
    cache, as the libraries compute them from the environment (or as already configured)."""
    home = os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
    dirs = [Path(os.getenv("HF_DATASETS_CACHE", os.path.join(home, "datasets"))).expanduser()]
    mod = sys.modules.get("datasets")
    if mod is not None:
        dirs.append(Path(str(mod.config.HF_DATASETS_CACHE)).expanduser())
    try:
        import huggingface_hub.constants as hc  # lazy: huggingface_hub only for hub datasets (light module)

        dirs.append(Path(hc.HF_HUB_CACHE).expanduser())
    except ImportError:
        dirs.append(Path(home) / "hub")
    return dirs


def _squash(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def may_be_cached(hub_id: str) -> bool:
    """Whether a local cache may hold some split of ``hub_id`` (a folder named after it: the
    prepared splits ``NAMESPACE___NAME``, the Hub download ``datasets--NAMESPACE--NAME``). False
    means ``datasets`` offline cannot load it; names are compared loosely, so True may be wrong."""
    want = {_squash(hub_id.replace("/", "___")), _squash("datasets--" + hub_id.replace("/", "--"))}
    for d in _cache_dirs():
        try:
            if any(_squash(e.name) in want for e in os.scandir(d)):
                return True
        except OSError:
            continue
    return False


def _not_cached_offline(ds: Resolved, what: str, no_download: str | None) -> None:
    """HubError (unavailable) without importing ``datasets`` when it could not load the split
    anyway: not installed, or offline / not allowed to download / Hub unreachable with no cache
    folder of the dataset. A ``fallback=`` file is then read at once (auditc plan and run alike)."""
    if "datasets" in sys.modules:
        return  # imported already: its own offline lookup costs nothing more
    if importlib.util.find_spec("datasets") is None:
        raise HubError(f"dataset '{ds.id}' reads the Hugging Face Hub, but the `datasets` package is not installed",
                       hint=HUB_HINT_INSTALL, unavailable="the `datasets` package is not installed")
    import huggingface_hub.constants as hc  # lazy: huggingface_hub only for hub datasets (light module)

    offline = offline_env()
    if not offline and no_download is None and _reachable(hc.ENDPOINT):
        return
    if may_be_cached(ds.value.id_):
        return
    why = ("offline (HF_DATASETS_OFFLINE/HF_HUB_OFFLINE)" if offline else no_download if no_download is not None
           else f"{hc.ENDPOINT} is unreachable")
    raise HubError(f"cannot load hub dataset {what}: it is not in the local datasets cache ({_cache_dirs()[0]})",
                   hint=f"{why}: only splits already in the local datasets cache ({_cache_dirs()[0]}) load; load it "
                        "once with network access (same HF_HOME), or declare a local copy with fallback=jsonl(...)",
                   unavailable=f"{why}, and the split is not in the local datasets cache")


def read_hub(ds: Resolved, no_download: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows, identity) of a hub dataset. Raises :class:`HubError` with the real cause.
    ``no_download``: read the local cache only, for this reason (the Hub host is not allowed)."""
    v = ds.value
    what = f"'{v.id_}'" + (f" (config {v.config!r})" if v.config else "") + f", split {v.split!r}"
    _not_cached_offline(ds, what, no_download)  # before importing `datasets` (seconds), when that settles it
    try:
        import datasets  # type: ignore  # lazy: `datasets` takes seconds to import, only for Hub splits
    except ImportError:
        raise HubError(f"dataset '{ds.id}' reads the Hugging Face Hub, but the `datasets` package is not installed",
                       hint=HUB_HINT_INSTALL, unavailable="the `datasets` package is not installed") from None
    import huggingface_hub.constants as hc  # lazy: huggingface_hub only for hub models

    offline = offline_env() or bool(datasets.config.HF_HUB_OFFLINE)
    forced = not offline and (no_download is not None or not _reachable(hc.ENDPOINT))
    why = ("offline (HF_DATASETS_OFFLINE/HF_HUB_OFFLINE)" if offline else no_download if no_download is not None
           else f"{hc.ENDPOINT} is unreachable")
    try:
        with _offline(datasets) if offline or forced else nullcontext():
            # hf://datasets/ID: the Hub repository only, never a local folder of that name (docs/security.md)
            split = datasets.load_dataset(f"hf://datasets/{check_hub_id(v.id_)}", v.config, split=v.split,
                                          revision=v.revision)
    except Exception as e:  # noqa: BLE001 - every failure of the library is the user's data problem here
        cause = f"{type(e).__name__}: {e}".strip()
        if offline or forced:
            hint = (f"{why}: only splits already in the local datasets cache ({datasets.config.HF_DATASETS_CACHE}) "
                    "load; load it once with network access (same HF_HOME), or declare a local copy with "
                    "fallback=jsonl(...)")
            raise HubError(f"cannot load hub dataset {what}: {cause}", hint=hint,
                           unavailable=f"{why}, and the split is not in the local datasets cache") from None
        raise HubError(f"cannot load hub dataset {what}: {cause}",
                       hint=f"check the id, config and split at {hc.ENDPOINT}/datasets/{v.id_}") from None
    commit = _cached_commit(split)
    if v.revision and _SHA.fullmatch(v.revision) and commit and not commit.startswith(v.revision):
        raise HubError(f"hub dataset {what}: the spec pins revision {v.revision!r} but the split loaded is commit "
                       f"{commit}" + (" (the offline cache holds only that one)" if offline or forced else ""),
                       hint="load the pinned revision once with network access, or pin the cached commit",
                       unavailable=(f"{why}, and the local datasets cache holds commit {commit}, not the pinned "
                                    f"revision {v.revision}") if offline or forced else None)
    rows = split.to_list()
    for i, r in enumerate(rows, 1):
        r["__line__"] = i
    ident = {
        "source": "hub", "hub_id": v.id_, "config": v.config, "split": v.split, "revision": v.revision,
        "commit": commit, "fingerprint": getattr(split, "_fingerprint", None),
        "content_sha256": content_sha256([{k: x for k, x in r.items() if k != "__line__"} for r in rows]),
        "offline": bool(offline or forced),
    }
    return rows, ident
