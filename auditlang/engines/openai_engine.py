"""An engine for any OpenAI-compatible HTTP server (OpenAI, vLLM's ``vllm serve``, llama.cpp...).

Input: a ModelConfig whose ``path`` is the SERVED model name and whose ``options`` say where
the server is (see ``KNOWN_OPTIONS``). Output: one Result per Request. Standard library only
(urllib); requests run on ``concurrency`` threads with retries and exponential backoff.

What a server exposes decides what this engine can do (``capabilities()``):
- Any server (``server: generic``): ``generate`` and ``choice_logprobs``.
  * ``choice_logprobs`` is WINDOW-LIMITED: the server returns only the ``top_logprobs`` best
    next tokens (OpenAI caps it at 20), so a label's logprob is known only when its first
    token is inside that window. A label outside it is ABSENT from ``choice_logprobs`` (listed
    in ``meta["labels_outside_window"]``), never a made-up value. Without the server's
    tokenizer a label is matched to the window token equal to it, else to the longest window
    token the label starts with (``meta["label_tokens"]`` shows each match).
  * Token ids are unknown to the OpenAI API: ``TokenLogprob.token_id`` is -1.
- vLLM's server (``server: vllm``) adds, through its documented extensions:
  * exact labels: the label's first token from ``/tokenize`` + ``/detokenize`` (the rule of the
    hf and vllm engines: the label tokenized on its own);
  * ``continuation_logprobs``: prompt ids (``/tokenize``, chat template applied by the server)
    + continuation ids sent to ``/v1/completions`` with ``echo=True, max_tokens=0, logprobs=k``;
  * ``constrained_choice``: ``structured_outputs={"choice": [...]}`` (vLLM >= 0.12), greedy;
  * assistant prefill: ``continue_final_message=True, add_generation_prompt=False``.
  * sampling ``top_k`` (a generate request's parameter) is sent as a top-level ``top_k`` only
    when set; only vLLM-style servers honour it (OpenAI's API rejects or ignores it).
- Chat-template variables (``options.chat_template_kwargs``, the model parameters
  ``enable_thinking`` and ``reasoning_effort``): ``reasoning_effort`` is sent as the top-level
  API parameter, the others as ``chat_template_kwargs`` (a vLLM extension; also passed to
  ``/tokenize`` so teacher-forced prompts match the chat endpoint's rendering).
  The values are vLLM's raw full-vocabulary logprobs (notes/vllm.md §1.2).
- ``hidden_states`` is never exposed by these APIs.

Failures: an unreachable server, a timeout after all retries, 401/403 or a persistent
429/503 raise EngineError (the run stops and stays resumable); a request the server rejects
(4xx, 500) becomes a Result with ``error`` set.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.engine_options import OpenAIOptions, openai_base_url
from auditlang.engines.params import error_result as _error, int_param as _int, str_list_param as _str_list, str_param as _str  # noqa: E501
from auditlang.engines.params import CHAT_TEMPLATE_KWARGS, chat_template_kwargs, sampling_top_k
from auditlang.core.requests import Prompt, Request, Result, Sample, TokenLogprob

KNOWN_OPTIONS = OpenAIOptions.known()  # option -> doc: declared once, in core/engine_options.py
_RETRY_STATUS = {429, 500, 502, 503, 504}
_FATAL_STATUS = {401, 403}
_NETWORK_ERRORS = (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, http.client.HTTPException)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the server's own origin (scheme, host and port): the API key
    in the request headers is never forwarded to a host the user did not name (docs/security.md)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            origin = f"{new.scheme}://{new.hostname}" + (f":{new.port}" if new.port else "")
            raise EngineError(f"the server at {old.scheme}://{old.netloc} redirected {old.path or '/'} to {origin} "
                              f"(HTTP {code}), another host: not following, so the API key is not sent there",
                              hint=f"if you trust {new.hostname}, name it yourself: base_url={origin}/... in the spec "
                                   f"and --allow-host {new.hostname}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOriginRedirects)


class RequestFailed(Exception):
    """The server rejected one request (the run goes on; the Result carries the message)."""


def check_config(config: ModelConfig) -> None:
    """Raise EngineError for options this engine does not accept."""
    _Options.parse(config)


class _Options(OpenAIOptions):
    """The engine's options (``OpenAIOptions``: each declared once, with its type, default and doc),
    checked by :meth:`parse`."""

    @staticmethod
    def parse(config: ModelConfig) -> "_Options":
        OpenAIOptions.check_names(config)
        opts = dict(config.options)
        opts.pop(CHAT_TEMPLATE_KWARGS, None)  # checked by the engine (engines/params.py)
        opts["base_url"] = openai_base_url(opts)[0]  # the one rule (core/engine_options.py)
        OpenAIOptions.check_values(config.name, opts)  # types, choices and declared limits: the one check
        if not opts["base_url"].startswith(("http://", "https://")):
            raise EngineError(f"model {config.name!r}: openai option 'base_url' must start with http:// or https:// "
                              f"(got {opts['base_url']!r})", hint=f"base_url: {KNOWN_OPTIONS['base_url']}")
        opts["base_url"] = opts["base_url"].rstrip("/")
        return _Options.model_construct(**opts)  # checked above; the defaults are OpenAIOptions'


class OpenAIEngine:
    """A model behind an OpenAI-compatible server."""

    engine_name = "openai"

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._opts = _Options.parse(config)
        try:
            self._template_kwargs = chat_template_kwargs(config.options, config.name)
        except ValueError as e:
            raise EngineError(str(e), hint=f"chat_template_kwargs: {KNOWN_OPTIONS['chat_template_kwargs']}") from None
        self.model = config.path
        from auditlang.core.trust import permitted  # lazy: the user's allowances only for a download or a server (docs/security.md)

        refused = permitted(self._opts.base_url, self._opts.api_key_env or None)
        if refused:
            raise EngineError(f"model {config.name!r}: not contacting {self._opts.base_url}: {refused}",
                              hint="see docs/security.md")
        key = os.environ.get(self._opts.api_key_env) if self._opts.api_key_env else None
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self._label_cache: dict[str, tuple[int, str] | None] = {}
        self._served = self._probe()

    # -- HTTP

    def _url(self, path: str) -> str:
        if path in ("/tokenize", "/detokenize"):  # vLLM serves these at the root, not under /v1
            root = self._opts.base_url[: -len("/v1")] if self._opts.base_url.endswith("/v1") else self._opts.base_url
            return root + path
        return f"{self._opts.base_url}{path}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One JSON call with retries. Raises EngineError (server-level) or RequestFailed."""
        url = self._url(path)
        data = json.dumps(body).encode("utf-8") if body is not None else None
        delay = self._opts.backoff
        last = ""
        timeouts = 0
        for attempt in range(self._opts.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers)
            try:
                with _OPENER.open(req, timeout=self._opts.timeout) as resp:
                    reply = json.loads(resp.read().decode("utf-8"))
                if not isinstance(reply, dict):  # a JSON list, string or number: not an OpenAI reply
                    raise RequestFailed(f"{path} answered with a JSON {type(reply).__name__}, not an object")
                return reply
            except urllib.error.HTTPError as e:
                detail = _error_text(e)
                if e.code in _FATAL_STATUS:
                    raise EngineError(f"server at {self._opts.base_url} refused the API key (HTTP {e.code}: {detail})",
                                      hint=f"set the key in ${self._opts.api_key_env} (option api_key_env names the variable)") from e
                if e.code not in _RETRY_STATUS:
                    raise RequestFailed(f"HTTP {e.code} from {path}: {detail}") from e
                last = f"HTTP {e.code}: {detail}"
                if e.code == 500 and attempt == self._opts.retries:
                    raise RequestFailed(f"HTTP 500 from {path} after {attempt + 1} tries: {detail}") from e
            except _NETWORK_ERRORS as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
                reason = getattr(e, "reason", e)
                timeouts += isinstance(e, (socket.timeout, TimeoutError)) or isinstance(reason, (socket.timeout, TimeoutError))
            except UnicodeDecodeError as e:
                raise RequestFailed(f"{path} answered with a body that is not UTF-8 ({e.reason})") from e
            except json.JSONDecodeError as e:
                raise RequestFailed(f"{path} answered with invalid JSON ({e})") from e
        if timeouts == self._opts.retries + 1 and getattr(self, "_served", None) is not None:
            # the server answered before: this one request hangs (a counted error; the run goes on and reports)
            raise RequestFailed(f"no reply from {path} within {self._opts.timeout:g} s ({timeouts} tries; option timeout)")
        raise EngineError(
            f"OpenAI-compatible server at {self._opts.base_url} is unreachable or failing ({last}; {self._opts.retries + 1} tries)",
            hint="start the server or fix options.base_url; results so far are kept: rerun `auditc run` to resume",
        )

    def _probe(self) -> list[str]:
        """GET /models: the server must answer; the model must be served (when it lists models)."""
        try:
            listing = self._call("GET", "/models")
        except RequestFailed:
            return []  # some servers have no /models: the first request will tell
        data = listing.get("data")
        models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        served = [str(m.get("id")) for m in models]
        if served and self.model not in served:
            raise EngineError(f"model {self.config.name!r}: the server at {self._opts.base_url} does not serve {self.model!r}",
                              hint="served models: " + ", ".join(served) + " (set the model's path to one of them)")
        self._model_info = next((m for m in models if m.get("id") == self.model), {})
        return served

    # -- protocol

    def capabilities(self) -> frozenset[str]:
        kinds = {"generate", "choice_logprobs"}
        if self._opts.server == "vllm":
            kinds |= {"continuation_logprobs", "constrained_choice"}
        return frozenset(kinds)

    def fingerprint(self) -> dict[str, Any]:
        info = getattr(self, "_model_info", {}) or {}
        return {
            "engine": self.engine_name,
            "base_url": self._opts.base_url,
            "model": self.model,
            "server": self._opts.server,
            "endpoint": self._opts.endpoint,
            "owned_by": info.get("owned_by"),
            "root": info.get("root"),  # vLLM: the checkpoint the server loaded
            "max_model_len": info.get("max_model_len"),
            "chat": self.config.chat,
            # only when set, so fingerprints of plain models are unchanged
            **({"chat_template_kwargs": dict(self._template_kwargs)} if self._template_kwargs else {}),
            # the top_logprobs window decides which labels have a value: only when not the default (as above)
            **({"window": self._opts.window} if self._opts.window != OpenAIOptions.defaults()["window"] else {}),
        }

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Requests run ``concurrency`` at a time; each result is yielded as soon as it finishes
        (any order), so progress counts finished requests, not the first one submitted."""
        reqs = list(requests)
        with ThreadPoolExecutor(max_workers=self._opts.concurrency) as pool:
            futures = [pool.submit(self._one, r) for r in reqs]
            try:
                for f in as_completed(futures):
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()

    def close(self) -> None:
        self._label_cache.clear()

    # -- one request

    def _one(self, req: Request) -> Result:
        handler = {
            "generate": self._generate,
            "choice_logprobs": self._choice_logprobs,
            "continuation_logprobs": self._continuation,
            "constrained_choice": self._constrained,
        }.get(req.kind)
        if handler is None or req.kind not in self.capabilities():
            hint = " (set option server: vllm for a vLLM server)" if req.kind in ("continuation_logprobs", "constrained_choice") else ""
            return _error(req, f"the openai engine cannot serve {req.kind!r} on this server{hint}")
        try:
            return handler(req)
        except (RequestFailed, ValueError) as e:
            return _error(req, str(e))
        except (AttributeError, TypeError, KeyError, IndexError) as e:  # a reply of another shape than the API's
            return _error(req, f"malformed reply from the server ({type(e).__name__}: {e})"[:500])

    def _route(self, prompt: Prompt) -> str:
        """'chat' or 'completions' for this prompt (ValueError when the option forbids it)."""
        want = "chat" if prompt.messages is not None else "completions"
        if prompt.messages is not None and not self.config.chat:
            raise ValueError(f"model {self.config.name!r} has chat off but got chat messages")
        if self._opts.endpoint not in ("auto", want):
            raise ValueError(f"a {'chat' if want == 'chat' else 'raw-text'} prompt needs the {want} endpoint, but option endpoint is {self._opts.endpoint!r}")
        if want == "chat" and prompt.continue_final and self._opts.server != "vllm":
            raise ValueError("assistant prefill (a final assistant message) needs server: vllm (continue_final_message)")
        return want

    def _body(self, prompt: Prompt, route: str, **params: Any) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, **{k: v for k, v in params.items() if v is not None}}
        if route == "chat":
            body["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages or ()]
            if prompt.continue_final:
                body.update(continue_final_message=True, add_generation_prompt=False)
            body.update(self._chat_extras())
            return "/chat/completions", body
        body["prompt"] = prompt.text
        return "/completions", body

    def _chat_extras(self) -> dict[str, Any]:
        """The model's chat-template variables for a chat request: ``reasoning_effort`` as the
        top-level API parameter (OpenAI reasoning models, vLLM's GPT-OSS), every other one in
        ``chat_template_kwargs`` (a vLLM / SGLang extension that OpenAI's API rejects)."""
        kw = dict(self._template_kwargs)
        out: dict[str, Any] = {}
        if "reasoning_effort" in kw:
            out["reasoning_effort"] = kw.pop("reasoning_effort")
        if kw:
            out[CHAT_TEMPLATE_KWARGS] = kw
        return out

    # generate ----------------------------------------------------------------

    def _generate(self, req: Request) -> Result:
        p = req.p
        max_tokens = _int(p, "max_tokens", None, lo=1)
        temperature = _float(p, "temperature", 0.0)
        n = _int(p, "n", 1, lo=1)
        k = _int(p, "top_logprobs", 0, lo=0)
        k_first = max(k, _int(p, "first_top_logprobs", 0, lo=0))  # a wider window at position 0 only
        stop = p.get("stop") or None
        if isinstance(stop, str):
            stop = [stop]
        top_k = sampling_top_k(p)
        route = self._route(req.prompt)
        greedy = temperature == 0.0
        lp_params = {"logprobs": True, "top_logprobs": k_first} if route == "chat" else {"logprobs": k_first}
        # top_k is an extension (vLLM-style servers honour it; OpenAI's API has no such field)
        path, body = self._body(req.prompt, route, max_tokens=max_tokens, temperature=temperature, top_p=p.get("top_p"),
                                n=1 if greedy else n, stop=list(stop) if stop else None, seed=req.seed,
                                top_k=top_k if top_k and not greedy else None, **lp_params)
        data = self._call("POST", path, body)
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index", 0))
        samples = [self._chat_sample(c, k_first) if route == "chat" else self._completion_sample(c, k_first) for c in choices]
        if not samples:
            raise RequestFailed(f"{path} returned no choices")
        if k_first > k:  # later positions keep the requested window only
            for s in samples:
                for t in s.tokens[1:]:
                    t.top = _window(t.top.items(), k) if k else {}
        if greedy and n > 1:  # greedy samples are identical (as in the hf and vllm engines)
            samples = [samples[0]] + [Sample(samples[0].text, [TokenLogprob(t.token, t.token_id, t.logprob, dict(t.top)) for t in samples[0].tokens],
                                             samples[0].finish_reason) for _ in range(n - 1)]
        meta = {"usage": data.get("usage"), "system_fingerprint": data.get("system_fingerprint"), "endpoint": route}
        return Result(request_id=req.id, kind=req.kind, samples=samples, meta=meta)

    def _chat_sample(self, c: dict[str, Any], k: int) -> Sample:
        content = ((c.get("logprobs") or {}).get("content")) or []
        toks = [TokenLogprob(str(t.get("token", "")), -1, float(t["logprob"]), _window(((a["token"], a["logprob"]) for a in t.get("top_logprobs") or []), k))
                for t in content]
        text = (c.get("message") or {}).get("content") or ""
        return Sample(text=text, tokens=toks, finish_reason=_finish(c.get("finish_reason")))

    def _completion_sample(self, c: dict[str, Any], k: int) -> Sample:
        lp = c.get("logprobs") or {}
        tops = lp.get("top_logprobs") or []
        toks = []
        for j, (tok, v) in enumerate(zip(lp.get("tokens") or [], lp.get("token_logprobs") or [])):
            top = tops[j] if j < len(tops) and tops[j] else {}
            toks.append(TokenLogprob(str(tok), -1, float(v), _window(top.items(), k)))
        return Sample(text=c.get("text") or "", tokens=toks, finish_reason=_finish(c.get("finish_reason")))

    # choice_logprobs ---------------------------------------------------------

    def _choice_logprobs(self, req: Request) -> Result:
        p = req.p
        labels = _str_list(p, "choices")
        k = _int(p, "top_logprobs", 0, lo=0)
        window_k = max(k, self._opts.window)
        route = self._route(req.prompt)
        lp_params = {"logprobs": True, "top_logprobs": window_k} if route == "chat" else {"logprobs": window_k}
        path, body = self._body(req.prompt, route, max_tokens=1, temperature=0.0, seed=req.seed, **lp_params)
        data = self._call("POST", path, body)
        choice = (data.get("choices") or [{}])[0]
        if route == "chat":
            content = ((choice.get("logprobs") or {}).get("content")) or []
            pairs = [(a["token"], a["logprob"]) for a in (content[0].get("top_logprobs") or [])] if content else []
        else:
            tops = (choice.get("logprobs") or {}).get("top_logprobs") or []
            pairs = list((tops[0] or {}).items()) if tops else []
        if not pairs:
            raise RequestFailed(f"{path} returned no top_logprobs (does the server support logprobs?)")
        window = _window(pairs, window_k)
        values: dict[str, float] = {}
        matched: dict[str, str] = {}
        outside: list[str] = []
        for label in labels:
            tok = self._label_first_token(label, window)
            if tok is not None and tok in window:
                values[label], matched[label] = window[tok], tok
            else:
                outside.append(label)
        meta: dict[str, Any] = {"window": window_k, "label_tokens": matched, "endpoint": route,
                                "label_rule": "server tokenizer (/tokenize)" if self._opts.server == "vllm" else "window string match"}
        if outside:
            meta["labels_outside_window"] = outside
        return Result(request_id=req.id, kind=req.kind, choice_logprobs=values,
                      top_logprobs=dict(list(window.items())[:k]) if k else {}, meta=meta)

    def _label_first_token(self, label: str, window: dict[str, float]) -> str | None:
        """The window string of the label's first token.

        server vllm: exactly, from the server's tokenizer. generic: the window token equal to
        the label, else the longest window token the label starts with."""
        if self._opts.server == "vllm":
            if label not in self._label_cache:
                ids = self._tokenize({"prompt": label, "add_special_tokens": False})
                self._label_cache[label] = (ids[0], self._detokenize([ids[0]])) if ids else None
            hit = self._label_cache[label]
            return hit[1] if hit else None
        if label in window:
            return label
        prefixes = [t for t in window if t and label.startswith(t)]
        return max(prefixes, key=len) if prefixes else None

    def _tokenize(self, body: dict[str, Any]) -> list[int]:
        data = self._call("POST", "/tokenize", {"model": self.model, **body})
        return [int(t) for t in data.get("tokens") or []]

    def _detokenize(self, ids: list[int]) -> str:
        return str(self._call("POST", "/detokenize", {"model": self.model, "tokens": ids}).get("prompt", ""))

    # continuation_logprobs (server: vllm) -----------------------------------

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        """Prompt token ids from the server (chat template applied there), hf.py's rules."""
        if prompt.text is not None:
            return self._tokenize({"prompt": prompt.text, "add_special_tokens": True})
        self._route(prompt)
        msgs = [{"role": m.role, "content": m.content} for m in prompt.messages or ()]
        extra = {CHAT_TEMPLATE_KWARGS: dict(self._template_kwargs)} if self._template_kwargs else {}
        return self._tokenize({"messages": msgs, "add_special_tokens": False, "add_generation_prompt": not prompt.continue_final,
                               "continue_final_message": prompt.continue_final, **extra})

    def _continuation(self, req: Request) -> Result:
        p = req.p
        cont_text = _str(p, "continuation")
        k = _int(p, "top_logprobs", 0, lo=0)
        prompt_ids = self._prompt_ids(req.prompt)
        cont_ids = self._tokenize({"prompt": cont_text, "add_special_tokens": False})
        if not prompt_ids or not cont_ids:
            raise ValueError("the prompt or the continuation encodes to zero tokens")
        body = {"model": self.model, "prompt": prompt_ids + cont_ids, "max_tokens": 0, "echo": True, "logprobs": k, "temperature": 0.0}
        data = self._call("POST", "/completions", body)
        lp = ((data.get("choices") or [{}])[0].get("logprobs")) or {}
        toks, vals, tops = lp.get("tokens") or [], lp.get("token_logprobs") or [], lp.get("top_logprobs") or []
        n = len(prompt_ids)
        if len(vals) < n + len(cont_ids):
            raise RequestFailed(f"echo returned {len(vals)} prompt logprobs for {n + len(cont_ids)} prompt tokens")
        out = []
        for j, tid in enumerate(cont_ids):
            top = tops[n + j] if n + j < len(tops) and tops[n + j] else {}
            out.append(TokenLogprob(str(toks[n + j]), tid, float(vals[n + j]), _window(top.items(), k)))
        return Result(request_id=req.id, kind=req.kind, continuation=out,
                      meta={"prompt_tokens": n, "sum_logprob": float(sum(t.logprob for t in out))})

    # constrained_choice (server: vllm) ---------------------------------------

    def _constrained(self, req: Request) -> Result:
        choices = _str_list(req.p, "choices")
        route = self._route(req.prompt)
        longest = max(len(self._tokenize({"prompt": c, "add_special_tokens": False})) for c in choices)
        path, body = self._body(req.prompt, route, max_tokens=longest + 1, temperature=0.0, seed=req.seed,
                                structured_outputs={"choice": choices})
        data = self._call("POST", path, body)
        c = (data.get("choices") or [{}])[0]
        text = (c.get("message") or {}).get("content") if route == "chat" else c.get("text")
        text = text or ""
        pick = text if text in choices else next((x for x in choices if x.strip() == text.strip()), None)
        if pick is None:
            raise RequestFailed(f"constrained decoding produced {text!r}, which is none of {choices!r}")
        return Result(request_id=req.id, kind=req.kind, choice=pick,
                      meta={"rule": "greedy decoding under a choice grammar (vLLM structured_outputs)", "endpoint": route})


def _window(pairs: Iterable[tuple[str, float]], k: int) -> dict[str, float]:
    """The k best (token, logprob) pairs, best first; the higher value kept on duplicate strings.
    (Servers may add the sampled token to the top-k: k+1 entries.)"""
    if k <= 0:
        return {}
    out: dict[str, float] = {}
    for tok, lp in sorted(((str(t), float(v)) for t, v in pairs if v is not None), key=lambda e: -e[1]):
        if tok not in out:
            out[tok] = lp
        if len(out) == k:
            break
    return out


def _finish(reason: Any) -> str:
    return {"stop": "stop", "eos": "stop", "length": "length"}.get(str(reason), "error")


def _error_text(e: urllib.error.HTTPError) -> str:
    try:
        raw = e.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - best effort for the message
        return str(e.reason)
    try:
        msg = json.loads(raw)
        err = msg.get("error", msg)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:500]
    except (json.JSONDecodeError, AttributeError):
        return raw[:500]






def _float(p: dict[str, Any], key: str, default: float) -> float:
    v = p.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise ValueError(f"parameter {key!r} must be a number >= 0 (got {v!r})")
    return float(v)
