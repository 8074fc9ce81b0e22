"""What a run may contact and which secrets it may read (docs/security.md).

A spec may name a remote endpoint (``openai(base_url=...)``) and an environment variable holding
its key (``api_key_env``). ``auditc run`` contacts a host that is not loopback only when the user
allows it outside the spec, and reads a variable that is set only when the user allows it by name:

- ``--allow-host HOST`` / ``--allow-secret NAME`` (repeatable), or
- the user config file ``$AUDITLANG_CONFIG``, else ``$XDG_CONFIG_HOME/auditlang/config.toml``
  (default ``~/.config/auditlang/config.toml``)::

      allow_hosts = ["api.openai.com"]
      allow_secrets = ["MY_TOKEN"]

Each use is recorded in ``run.json`` (``access``) and in the reporting checklist.
"""

from __future__ import annotations

import os
import sys
import tomllib
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from auditlang.core.diagnostics import DiagnosticBag
from auditlang.core.errors import UserError
from auditlang.core.engine_options import openai_base_url
from auditlang.core.trust import Allowances, is_loopback, secret_set
from auditlang.data.hub import offline_env
from auditlang.resolve.models import model_config
from auditlang.resolve.spec import Spec

ENV_CONFIG = "AUDITLANG_CONFIG"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class Access:
    """One model's network use: the URL it calls, its host, and the variable its key comes from."""

    model: str
    url: str
    host: str
    loopback: bool
    secret: str | None
    url_from: str  # "spec", "environment" ($OPENAI_BASE_URL / $HF_ENDPOINT) or "default"
    kind: str = "model"  # "model" (prompts sent), "dataset" or "weights" (Hugging Face Hub downloads)


def config_path() -> Path:
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "auditlang" / "config.toml"


def load_allowances(hosts: list[str] | None = None, secrets: list[str] | None = None) -> Allowances:
    """Command-line allowances plus the user config file's (a missing file allows nothing)."""
    out = Allowances()
    path = config_path()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise UserError(f"cannot read the auditlang config file {path}: {e}",
                            hint='it is TOML: allow_hosts = ["host"], allow_secrets = ["NAME"]') from None
        for key, into in (("allow_hosts", out.hosts), ("allow_secrets", out.secrets)):
            vals = data.get(key, [])
            if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
                raise UserError(f"{path}: {key} must be a list of strings", hint=f'{key} = ["..."]')
            into.update({v.lower() if key == "allow_hosts" else v: str(path) for v in vals})
    out.hosts.update({h.lower(): "--allow-host" for h in hosts or []})
    out.secrets.update({s: "--allow-secret" for s in secrets or []})
    return out


def used_models(spec: Spec) -> list[str]:
    """Models a run would call: each audit's models, its judges and its wrong_from models."""
    out: list[str] = []
    for aid, audit in spec.of_kind("audit").items():
        a = audit.value
        out += list(a.models)
        out += spec.judge_models([aid])
        for p in a.protocols:
            if p in spec.objects:
                out += list(getattr(spec.get(p).value, "wrong_from", None) or [])
    return [m for m in dict.fromkeys(out) if m in spec.objects]


def run_access(spec: Spec, engine_override: str | None = None) -> list[Access]:
    """Network endpoints and secrets the run would use (models on the openai engine)."""
    out = []
    for mid in used_models(spec):
        cfg = model_config(spec, mid, engine_override)
        if cfg.engine != "openai":
            continue
        # model_config already applied $OPENAI_BASE_URL to a model that names no base_url
        url, src = openai_base_url(cfg.options)
        url_from = ("spec" if "base_url" in dict(spec.get(mid).param_spans)
                    else "environment" if src != "default" else "default")
        host = (urlsplit(str(url)).hostname or "").lower()
        secret = cfg.options.get("api_key_env", DEFAULT_KEY_ENV) or None
        out.append(Access(mid, str(url), host, is_loopback(host), secret, url_from))
    return out + weights_access(spec, engine_override) + hub_access(spec)


HUB_TOKEN = "HF_TOKEN"  # the Hub token huggingface_hub sends by itself when it is set (or logged in)


def hub_endpoint() -> tuple[str, str]:
    """(the Hub endpoint, "environment" or "default"): $HF_ENDPOINT, else huggingface.co."""
    if os.environ.get("HF_ENDPOINT"):
        return os.environ["HF_ENDPOINT"].rstrip("/"), "environment"
    return "https://huggingface.co", "default"


def _hub_token() -> str | None:
    """HF_TOKEN when a Hub token is there to be sent ($HF_TOKEN, or the login's token file)."""
    if os.environ.get(HUB_TOKEN):
        return HUB_TOKEN
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()
    path = Path(os.environ.get("HF_TOKEN_PATH") or home / "token").expanduser()
    return HUB_TOKEN if path.is_file() else None


def hub_offline() -> bool:
    """Whether the Hub libraries run from the local cache only (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def weights_access(spec: Spec, engine_override: str | None = None) -> list[Access]:
    """hf and vllm models named by a Hub id (not a local folder or file, not embedded) download
    their weights from the Hub endpoint, unless the Hub libraries run offline."""
    if hub_offline():
        return []
    url, url_from = hub_endpoint()
    host = (urlsplit(url).hostname or "").lower()
    out = []
    for mid in used_models(spec):
        o = spec.get(mid)
        cfg = model_config(spec, mid, engine_override)
        if cfg.engine not in ("hf", "vllm") or o.ctor == "embedded" or Path(cfg.path).expanduser().exists():
            continue
        out.append(Access(mid, f"{url}/{cfg.path}", host, is_loopback(host), _hub_token(), url_from, kind="weights"))
    return out


def hub_access(spec: Spec) -> list[Access]:
    """``hub(...)`` datasets of the audits contact the Hub endpoint ($HF_ENDPOINT, else
    huggingface.co) unless the Hub libraries run offline (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE)."""
    if offline_env():
        return []
    used = {d for a in spec.of_kind("audit").values() for d in a.value.datasets}
    used |= {spec.get(d).value.dev for d in used if d in spec.objects and spec.get(d).value.dev}  # dev splits
    url, url_from = hub_endpoint()
    host = (urlsplit(url).hostname or "").lower()
    token = _hub_token()
    return [Access(d, f"{url}/datasets/{spec.get(d).value.id_}", host, is_loopback(host), token, url_from,
                   kind="dataset")
            for d in sorted(used) if d in spec.objects and spec.get(d).ctor == "hub"]


def not_downloaded(accesses: list[Access], allow: Allowances) -> dict[str, str]:
    """Hub datasets whose host the user has not allowed: dataset id -> why nothing is downloaded.
    ``auditc plan`` and ``auditc show`` read them from the local cache only (else estimate or
    stop), so no command contacts a host the user has not allowed."""
    return {a.model: f"downloads from {a.host} are not allowed without --allow-host {a.host}"
            for a in accesses if a.kind == "dataset" and allow.host_ok(a.host) is None}


@contextmanager
def withhold_hub_token(allow: Allowances):
    """Within: the Hub libraries send no token unless the user allowed HF_TOKEN
    (``--allow-secret HF_TOKEN``): public datasets and models still download."""
    if allow.secret_ok(HUB_TOKEN) is not None:
        yield
        return
    saved = os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN")
    os.environ["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1"  # read by huggingface_hub at import, and by subprocesses
    consts = sys.modules.get("huggingface_hub.constants")
    before = getattr(consts, "HF_HUB_DISABLE_IMPLICIT_TOKEN", None)
    if consts is not None:
        consts.HF_HUB_DISABLE_IMPLICIT_TOKEN = True
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HF_HUB_DISABLE_IMPLICIT_TOKEN", None)
        else:
            os.environ["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = saved
        consts = sys.modules.get("huggingface_hub.constants")
        if consts is not None:
            consts.HF_HUB_DISABLE_IMPLICIT_TOKEN = bool(before) if before is not None else \
                (saved or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def offline_hubs(spec: Spec, accesses: list[Access], allow: Allowances) -> dict[str, str]:
    """Hub datasets declaring a ``fallback=`` file whose Hub host the user has not allowed:
    dataset id -> why their split is read from the local cache only (and, when it is not
    there, from the fallback file). They need no permission: nothing is downloaded."""
    why = {a.model: f"downloads from {a.host} are not allowed without --allow-host {a.host}"
           for a in accesses if a.kind == "dataset" and allow.host_ok(a.host) is None}
    audited = {d for a in spec.of_kind("audit").values() for d in a.value.datasets}
    out = {d: w for d, w in why.items() if getattr(spec.get(d).value, "fallback", None)}
    for d, w in why.items():  # a dev split only Hub datasets with a fallback use: read offline like them
        users = [u for u in audited if u in spec.objects and spec.get(u).value.dev == d]
        if d not in out and d not in audited and users and all(u in out for u in users):
            out[d] = w
    return out


def check_access(spec: Spec, accesses: list[Access], allow: Allowances) -> DiagnosticBag:
    """E180 for a host the user did not allow, E181 for a secret the user did not allow. A hub
    dataset with a fallback file is read offline instead (:func:`offline_hubs`)."""
    bag = DiagnosticBag()
    offline = offline_hubs(spec, accesses, allow)
    for a in accesses:
        o = spec.get(a.model)
        if a.kind == "dataset" and a.model in offline:
            continue
        if a.kind == "dataset" and allow.host_ok(a.host) is None:
            bag.error("E180", f"dataset '{a.model}' would be downloaded from {a.host} ({a.url}), a host you have not "
                      "allowed", o.span,
                      hint=f"if you trust it: --allow-host {a.host} (or allow_hosts in {config_path()}); with the "
                           "dataset already in the local cache, HF_DATASETS_OFFLINE=1 reads it without the network")
            continue
        if a.kind == "weights" and allow.host_ok(a.host) is None:
            bag.error("E180", f"model '{a.model}' would download its weights from {a.host} ({a.url}), a host you have "
                      "not allowed", o.span,
                      hint=f"if you trust it: --allow-host {a.host} (or allow_hosts in {config_path()}); with the "
                           "model already in the local cache, HF_HUB_OFFLINE=1 reads it without the network")
            continue
        if a.kind != "model":
            continue  # an allowed Hub download; its token is sent only with --allow-secret HF_TOKEN (withhold_hub_token)
        if allow.host_ok(a.host) is None:
            where = o.param_span("base_url") if a.url_from == "spec" else o.span
            bag.error("E180", f"model '{a.model}' would send prompts to {a.host or a.url!r} ({a.url}), a host you have "
                      "not allowed", where,
                      hint=f"if you trust it: auditc run ... --allow-host {a.host or 'HOST'} (or add it to "
                           f"allow_hosts in {config_path()}); loopback servers need no permission")
        if a.secret and secret_set(a.secret) and allow.secret_ok(a.secret) is None:
            named = "api_key_env" in dict(o.param_spans)
            bag.error("E181", f"model '{a.model}' would read the environment variable {a.secret} "
                      f"({'api_key_env' if named else 'the openai default api_key_env'}) and send it to {a.host}",
                      o.param_span("api_key_env") if named else o.span,
                      hint=f"if you trust {a.host} with it: --allow-secret {a.secret} (or allow_secrets in "
                           f"{config_path()}); every secret needs your consent by name")
    return bag


def access_record(accesses: list[Access], allow: Allowances) -> list[dict[str, Any]]:
    """The ``run.json`` entry: every endpoint and secret name, and who allowed it (never the value)."""
    return [{**asdict(a), "host_allowed_by": allow.host_ok(a.host),
             "secret_allowed_by": allow.secret_ok(a.secret) if a.secret else None,
             "secret_set": secret_set(a.secret)} for a in accesses]
