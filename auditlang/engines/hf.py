"""The Hugging Face transformers engine: every request kind, batched, on CPU or CUDA.

Input: a ModelConfig whose ``path`` is an embedded short name, a local checkpoint directory,
a local ``.gguf`` file, or a Hub id. Output: one Result per Request (see plan/requests.py).

Conventions (also in docs/engines.md):
- Prompts: ``Prompt.text`` is tokenized as raw text with the tokenizer's special tokens (BOS
  where the model's tokenizer adds one). ``Prompt.messages`` go through the tokenizer's chat
  template (``add_generation_prompt=True``); when the last message is the assistant's it is
  continued instead (``continue_final_message=True``: rendered without a generation prompt,
  cut after the final message so no end-of-turn follows). The rendered text is tokenized
  without adding special tokens. Messages for a base model (``chat=False`` or no chat
  template) raise EngineError.
- Labels, continuations and choices are tokenized ON THEIR OWN, exactly as written (no space
  is added, no special tokens): ``" A"`` and ``"A"`` are different labels. After a chat
  generation prompt the model's first token is usually ``"A"``; after a raw ``"Answer:"`` it
  is usually ``" A"``. The prompt's tokens are never re-merged with the label's.
- Logprobs are full-vocabulary ``log_softmax`` of the raw logits in float32 (no temperature,
  no top-p, no constraint), like vLLM's default ``raw_logprobs``. Top-k windows map the
  decoded token string to its logprob; when two ids decode to the same string the higher
  logprob is kept.
- Batches are left-padded with an attention mask and explicit position ids (cumulative mask
  - 1); the fingerprint records ``padding_side = "left"``. Batched and unbatched logprobs
  agree to float tolerance, not bit for bit.
- Sampling draws from a per-sample ``torch.Generator`` on the CPU seeded from (request seed,
  sample index), so a request's samples do not depend on what else is in its batch.
  Temperature, then sampling ``top_k``, then ``top_p`` (vLLM's order and semantics).
- ``options.chat_template_kwargs`` (e.g. ``{"enable_thinking": False}``) are passed to
  ``apply_chat_template`` for every chat prompt and recorded in the fingerprint.
- One prefill per prompt: all ``generate`` requests of one encoded prompt in a ``run`` call
  (greedy or sampled, any budget) share one prefill (``hf_generate``), and a
  ``choice_logprobs`` request with the same encoded prompt is served from that prefill (the same
  last-position log-softmax vector), not from a forward pass of its own. ``sort_key`` tells the
  executor to put such requests next to each other (same commit batch), shortest prompts
  first, so batches carry little padding.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import hashlib
import json
import os
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.core.engine import EngineError, ModelConfig, ProgressHook, report_progress
from auditlang.core.engine_options import HFOptions
from auditlang.core.requests import REQUEST_KINDS, Prompt, Request, Result, TokenLogprob
from auditlang.engines.gen import SAMPLER, _GenSpec, _GenState
from auditlang.engines.hf_batch import BatchSizer, drop_frames, is_oom, release
from auditlang.engines.hf_generate import Decoder, GenStats, GenUnit
from auditlang.engines.hfstack import HF_EXTRA_HINT, import_hf_stack  # noqa: F401
from auditlang.engines.params import error_result as _error, int_param as _int, str_list_param as _str_list, str_param as _str  # noqa: E501
from auditlang.engines.params import chat_template_kwargs, chat_template_of, render_chat_prompt
from auditlang.engines import embedded, hf_scoring
from auditlang.engines.weight_hash import WeightHash, weights_hashed_beside, weights_sha256  # noqa: F401 (re-exported)

log = logging.getLogger("auditlang.engines.hf")
KNOWN_OPTIONS = HFOptions.known()  # option -> doc: declared once, in core/engine_options.py


def _option(name: str, config: ModelConfig) -> Any:
    """Option ``name`` of ``config``, else its default (HFOptions)."""
    return config.options.get(name, HFOptions.model_fields[name].default)


_DTYPES = ("float32", "bfloat16", "float16")


def check_config(config: ModelConfig) -> None:
    """Raise EngineError for options this engine does not accept (imports no torch)."""
    HFOptions.check_names(config)
    if config.batch_size != "auto" and (not isinstance(config.batch_size, int) or config.batch_size < 1):
        raise EngineError(f"model {config.name!r}: batch_size must be >= 1 or 'auto' (got {config.batch_size!r})")


def label_token_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a label / continuation / choice: the text on its own, exactly as written,
    without special tokens (the rule every engine must share so labels mean the same thing)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


# ----------------------------------------------------------------------------- locating weights


@dataclass(frozen=True)
class ResolvedModel:
    """Where the weights are and what identifies them."""

    local_dir: Path
    gguf_file: str | None  # a GGUF file inside local_dir (dequantized at load time)
    source: str  # "embedded" | "local" | "hub"
    revision: str | None = None  # hub commit
    provenance: dict[str, Any] | None = None  # embedded conversion record


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def hub_offline() -> bool:
    truthy = {"1", "ON", "YES", "TRUE"}
    return any(os.environ.get(v, "").upper() in truthy for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def resolve_model(config: ModelConfig) -> ResolvedModel:
    """Embedded short name, local dir, local .gguf, or Hub id -> a local directory."""

    if embedded.is_embedded(config.path):
        d = embedded.resolve_embedded(config.path)
        return ResolvedModel(d, None, "embedded", provenance=embedded.read_provenance(d))
    p = Path(config.path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return ResolvedModel(p.parent.resolve(), p.name, "local")
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise EngineError(
                f"model {config.name!r}: {p} is a directory but has no config.json",
                hint="point `path` at a Hugging Face checkpoint directory (config.json + weights) or a .gguf file",
            )
        return ResolvedModel(p.resolve(), None, "local")
    if p.is_absolute() or config.path.startswith((".", "~")) or not _HUB_ID.match(config.path):
        raise EngineError(
            f"model {config.name!r}: path {config.path!r} does not exist",
            hint="use a local checkpoint directory, a .gguf file, a Hub id like 'org/name', or an embedded model "
            "(smollm2-135m-instruct, gemma3-270m)",
        )
    return _resolve_hub(config)


def _resolve_hub(config: ModelConfig) -> ResolvedModel:
    try:
        from huggingface_hub import snapshot_download  # lazy: huggingface_hub only for hub models
        from huggingface_hub.errors import LocalEntryNotFoundError  # lazy: huggingface_hub only for hub models
    except ImportError as e:
        raise EngineError(f"loading {config.path!r} from the Hub needs huggingface_hub ({e})", hint=HF_EXTRA_HINT) from e
    offline = hub_offline()
    if not offline:
        import huggingface_hub.constants as hc  # lazy: huggingface_hub only for hub models
        from auditlang.core.trust import permitted  # lazy: the user's allowances only for a download or a server (docs/security.md)

        refused = permitted(hc.ENDPOINT, None)
        if refused:
            raise EngineError(f"model {config.name!r}: not downloading {config.path!r} from {hc.ENDPOINT}: {refused}",
                              hint="see docs/security.md; HF_HUB_OFFLINE=1 reads the local cache only")
    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"]
    try:
        d = snapshot_download(config.path, revision=config.revision, local_files_only=offline, allow_patterns=patterns)
    except LocalEntryNotFoundError as e:
        if offline:
            raise EngineError(
                f"model {config.name!r}: {config.path!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set",
                hint=f"download it on a machine with network (`hf download {config.path}`), unset HF_HUB_OFFLINE, "
                "or set `path` to a local checkpoint directory",
            ) from e
        raise _hub_error(config, e) from e
    except Exception as e:  # network errors, 401/404 from the Hub
        raise _hub_error(config, e) from e
    d = Path(d)
    revision = d.name if d.parent.name == "snapshots" else config.revision
    return ResolvedModel(d, None, "hub", revision=revision)


def _hub_error(config: ModelConfig, e: Exception) -> EngineError:
    return EngineError(
        f"model {config.name!r}: could not fetch {config.path!r} from the Hugging Face Hub ({type(e).__name__}: {e})",
        hint="check the id and your network; with no network, set HF_HUB_OFFLINE=1 to use the local cache, "
        "or set `path` to a local checkpoint directory",
    )


# ----------------------------------------------------------------------------- loading

# tokenizer_config.json keys that describe the file, not the tokenizer's arguments
_TOKENIZER_FILE_KEYS = frozenset({"tokenizer_class", "backend", "is_local", "local_files_only", "auto_map"})


def _load_tokenizer(transformers: Any, resolved: ResolvedModel, extra: dict[str, Any]) -> Any:
    """The tokenizer. An embedded model's converted checkpoint is read straight from its
    ``tokenizer.json`` (with ``tokenizer_config.json``'s special tokens and the chat template):
    the same ids, decodes and chat rendering as ``AutoTokenizer`` (tests/engines), without the
    model-specific class that rebuilds Gemma's 262k-token vocabulary in Python (7 s -> 1 s of CPU)."""
    d = resolved.local_dir
    if resolved.source == "embedded" and (d / "tokenizer.json").is_file():
        cfg_file = d / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text(encoding="utf-8")) if cfg_file.is_file() else {}
        kw = {k: v for k, v in cfg.items() if k not in _TOKENIZER_FILE_KEYS}
        template = d / "chat_template.jinja"
        if template.is_file():
            kw["chat_template"] = template.read_text(encoding="utf-8")
        return transformers.PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"), name_or_path=str(d), **kw)
    return transformers.AutoTokenizer.from_pretrained(resolved.local_dir, **extra)


def _model_class(transformers: Any, resolved: ResolvedModel, extra: dict[str, Any]) -> Any:
    """The model class an embedded checkpoint names (``architectures`` in config.json), imported
    alone instead of through the Auto classes (whose import builds every model's docstrings);
    None for other checkpoints (the Auto classes choose)."""
    if resolved.source != "embedded" or resolved.gguf_file or extra.get("trust_remote_code"):
        return None
    try:
        archs = json.loads((resolved.local_dir / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError):
        return None
    cls = getattr(transformers, archs[0], None) if len(archs) == 1 else None
    return cls if cls is not None and hasattr(cls, "config_class") else None


def _load_model(transformers: Any, cls: Any, d: Path, kw: dict[str, Any]) -> Any:
    """The weights, through ``cls`` when known (:func:`_model_class`), else AutoModelForCausalLM."""
    return (cls or transformers.AutoModelForCausalLM).from_pretrained(d, **kw)


# ----------------------------------------------------------------------------- the engine


@dataclass
class _Row:
    """One sequence to run: a prompt and (teacher forcing) a continuation."""

    owner: int  # index into the request list
    prompt: list[int]
    cont: list[int] = field(default_factory=list)
    sample: int = 0  # sample index (generate), choice index (constrained), layer (hidden_states)
    extra: Any = None  # parsed per-kind parameters


# batch_size=auto on CUDA: how each shape's batch is found (engines/hf_batch.py), in the fingerprint
BATCH_RULE = "per shape from its longest row (prompt + max_tokens), halved on out of memory"
AUTO_BATCH_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def auto_batch_rows(free_bytes: float, per_row_bytes: float) -> int:
    """``batch_size=auto``'s rule: the largest grid value (powers of two and 1.5x them, up to
    1024) whose rows fit in 80 % of ``free_bytes``; at least 1."""
    rows = int(0.8 * free_bytes / max(per_row_bytes, 1))
    return max([g for g in AUTO_BATCH_GRID if g <= rows] or [1])


class HFEngine:
    """A transformers causal LM serving all five request kinds."""

    engine_name = "hf"

    # Set by the executor while ``run`` is iterated (core/engine.py ProgressHook): reported after
    # each scoring forward batch (a request's rows each count 1/rows) and each finished
    # generation sample (1/samples of its request), so progress moves inside a commit batch.
    progress_hook: ProgressHook | None = None

    def __init__(self, config: ModelConfig) -> None:
        torch, transformers = import_hf_stack()
        self._torch = torch
        self._transformers = transformers
        self.config = config
        check_config(config)
        auto_batch = config.batch_size == "auto"
        try:
            self._template_kwargs = chat_template_kwargs(config.options, config.name)
        except ValueError as e:
            raise EngineError(str(e), hint=f"chat_template_kwargs: {KNOWN_OPTIONS['chat_template_kwargs']}") from None
        self._resolved = resolve_model(config)
        self._weights_sha256 = WeightHash(self._resolved)  # a local checkpoint: hashed by a child process beside the load
        self.device = self._pick_device(config.device)
        self.compile = _option("compile", config)
        if not isinstance(self.compile, bool):
            raise EngineError(f"compile must be true or false (got {self.compile!r})", hint=f"compile: {KNOWN_OPTIONS['compile']}")
        if self.compile and not self.device.startswith("cuda"):
            raise EngineError(f"compile=true needs a CUDA device (this model loads on {self.device})",
                              hint="remove compile=true on a CPU: it pays off only for large scoring audits on a GPU")
        d, gguf = self._resolved.local_dir, self._resolved.gguf_file
        extra: dict[str, Any] = {"trust_remote_code": bool(_option("trust_remote_code", config))}
        if gguf:
            extra["gguf_file"] = gguf
        try:
            self.tokenizer = _load_tokenizer(transformers, self._resolved, extra)
            cls = _model_class(transformers, self._resolved, extra)
            dtype = self._pick_dtype(cls.config_class.from_pretrained(d, **extra) if cls is not None
                                     else transformers.AutoConfig.from_pretrained(d, **extra))
            kw = dict(extra, dtype=dtype)
            if config.options.get("attn_implementation"):
                kw["attn_implementation"] = config.options["attn_implementation"]
            model = _load_model(transformers, cls, d, kw)
        except EngineError:
            raise
        except (OSError, ValueError, ImportError) as e:
            raise EngineError(f"model {config.name!r}: transformers could not load {d} ({type(e).__name__}: {e})", hint=HF_EXTRA_HINT if isinstance(e, ImportError) else None) from e
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self.dtype = dtype
        self.cpu_linear = self._pack_linears(_option("cpu_linear", config))
        self._compiled: tuple[Any, Any] | None = None  # (model, its torch.compile wrapper)
        self.scoring_padding = "left"  # "right": hf_scoring's mask-free path (compile=true, eligible models)
        self._vocab = int(self.model.get_output_embeddings().weight.shape[0])
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(int(self.tokenizer.eos_token_id))
        self.eos_ids = frozenset(int(i) for i in eos_ids)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.eos_ids) if self.eos_ids else 0)
        self.max_positions = getattr(self.model.config, "max_position_embeddings", None)
        self._budget = int(_option("logits_budget", config))
        # fixed cost of one forward pass in padded-token equivalents (see _chunks)
        self._batch_cost = 64 if self.device == "cpu" else 4096
        self._token_str: dict[int, str] = {}
        self._label_cache: dict[str, list[int]] = {}
        self._fingerprint: dict[str, Any] | None = None
        self.gen_stats = GenStats()
        # requests per engine.run call the executor sends (its commit batch): on a GPU, calls of
        # 16 batches, so continuous batching stays full and few calls end on a lone long row
        self.call_size: int | None = None
        self.auto_batch_size: int | None = None
        self.sizer = BatchSizer(fixed=None if auto_batch else int(config.batch_size))
        if auto_batch:  # found once, recorded in the fingerprint; the config then carries the number
            self.auto_batch_size = self._find_batch_size()
            self.config = dataclasses.replace(config, batch_size=self.auto_batch_size)
        if self.device.startswith("cuda"):
            self.call_size = 16 * int(self.config.batch_size)
        if self.compile:
            self._compile_now()

    # -- setup helpers

    def _pack_linears(self, want: Any) -> str:
        """On a CPU in float32, run every linear layer except the output head through oneDNN with
        weights pre-packed once (``torch.ops.mkldnn._linear_pointwise``, what torch.compile's CPU
        backend does): 7-15 % less forward time than stock ``F.linear`` (MKL) on the project's
        machine, up to 1.7x on decoding-step shapes. Another float32 summation order: logprobs
        move by ~1e-4 at most, so the choice is in the fingerprint. Returns what runs: 'onednn'
        or 'torch' (GPU, other dtypes, ``cpu_linear='torch'``, or a torch without oneDNN)."""
        if want not in ("onednn", "torch"):
            raise EngineError(f"model {self.config.name!r}: cpu_linear must be 'onednn' or 'torch' (got {want!r})",
                              hint=f"cpu_linear: {KNOWN_OPTIONS['cpu_linear']}")
        torch = self._torch
        mkldnn = getattr(torch.ops, "mkldnn", None)
        if (want == "torch" or self.device != "cpu" or self.dtype != torch.float32
                or not torch.backends.mkldnn.is_available() or not hasattr(mkldnn, "_linear_pointwise")):
            return "torch"
        head = self.model.get_output_embeddings()
        targets = [(parent, name, child) for parent in self.model.modules() for name, child in parent.named_children()
                   if type(child) is torch.nn.Linear and child is not head]
        if not targets:
            return "torch"
        try:
            packed = [_packed_linear(torch, child) for _, _, child in targets]
            with torch.inference_mode():
                packed[0](torch.zeros(1, 2, targets[0][2].in_features))
        except Exception:  # noqa: BLE001 - a torch build whose oneDNN ops refuse: keep stock linears
            return "torch"
        for (parent, name, _), new in zip(targets, packed):
            setattr(parent, name, new)
        return "onednn"

    def _pick_device(self, device: str) -> str:
        torch = self._torch
        if device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if device != "cpu" and not re.fullmatch(r"cuda(:\d+)?", device):
            raise EngineError(f"model {self.config.name!r}: unknown device {device!r}", hint="use cpu, cuda, cuda:N or auto")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(f"model {self.config.name!r}: device {device!r} requested but CUDA is not available", hint="use device: cpu (or auto)")
        if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise EngineError(f"model {self.config.name!r}: device {device!r} requested but this machine has {count} CUDA device(s)",
                              hint=f"use cuda:0 .. cuda:{count - 1}, or cuda / auto")
        return device

    # largest batch_size=auto may pick, and the tokens per row it must fit (prompt + generation)
    AUTO_BATCH_MAX = AUTO_BATCH_GRID[-1]
    AUTO_BATCH_TOKENS = 1024

    def _find_batch_size(self) -> int:
        """``batch_size=auto``: on a CPU 16 (more rows only add padding on a few cores); on CUDA the
        largest batch (at most AUTO_BATCH_MAX) whose rows of AUTO_BATCH_TOKENS
        tokens fit in 80 % of the free device memory, measured once by a probe forward of 8
        left-padded rows (KV cache and activations, the attention mask's path) plus each row's
        float32 logits, rounded down to the grid ``AUTO_BATCH_GRID`` (:func:`auto_batch_rows`).
        The grid keeps the batch, and with it float32 rounding, the same when free
        memory differs a little: a model run after another in one process (whose memory the
        allocator may not have returned yet) and the same model alone on a Ray worker's GPU.
        The same measurement sizes each work shape from its longest row (``self.sizer``,
        :mod:`auditlang.engines.hf_batch`); this number is the shape of AUTO_BATCH_TOKENS."""
        torch = self._torch
        if not self.device.startswith("cuda"):
            self.sizer.fixed = 16
            return 16
        gc.collect()  # an engine closed earlier in this process may hold cycles that pin GPU memory
        dev = torch.device(self.device)
        length = min(self.AUTO_BATCH_TOKENS, (self.max_positions or self.AUTO_BATCH_TOKENS) - 1)
        probe = 8
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        with torch.inference_mode():
            ids = torch.full((probe, length), self.pad_id, dtype=torch.long, device=dev)
            mask = torch.ones((probe, length), dtype=torch.long, device=dev)
            mask[:, 0] = 0  # left padding, as every real batch: the masked attention path
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
            del out
        torch.cuda.synchronize(dev)
        per_token = (torch.cuda.max_memory_allocated(dev) - base) / probe / length
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(dev)
        self.sizer.free, self.sizer.per_token, self.sizer.per_row = free, per_token, 4 * 4 * self._vocab  # + logits, log-softmax
        self.sizer.grid_rows = auto_batch_rows
        return auto_batch_rows(free, per_token * length + 4 * 4 * self._vocab)

    def _pick_dtype(self, hf_config: Any) -> Any:
        """``auto`` = the checkpoint's stored dtype (float32 if unknown; float16 -> float32 on CPU)."""
        torch, name = self._torch, self.config.dtype
        if name == "auto":
            stored = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None)
            stored = str(stored).replace("torch.", "") if stored is not None else "float32"
            name = stored if stored in _DTYPES else "float32"
            if name == "float16" and not self.device.startswith("cuda"):
                name = "float32"
        if name not in _DTYPES:
            raise EngineError(f"model {self.config.name!r}: unknown dtype {name!r}", hint="use auto, float32, bfloat16 or float16")
        return getattr(torch, name)

    # -- protocol

    def capabilities(self) -> frozenset[str]:
        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            r, torch = self._resolved, self._torch
            device = self.device.split(":")[0]
            if device == "cuda":
                device = f"cuda:{torch.cuda.get_device_name(torch.device(self.device))}"
            template = self._chat_template()
            prov = r.provenance or {}
            self._fingerprint = {
                "engine": self.engine_name,
                "transformers": self._transformers.__version__,
                "torch": torch.__version__,
                "model": self.config.path,
                "source": r.source,
                "revision": r.revision or self.config.revision,
                "weights_sha256": self._weights_sha256.get(),
                "embedded": {k: prov.get(k) for k in ("distribution", "version", "gguf_sha256", "dtype", "recipe_version", "transformers")} if prov else None,
                "dtype": str(self.dtype).replace("torch.", ""),
                "device": device,
                "padding_side": "left",
                "chat": self.config.chat,
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
                "attn_implementation": getattr(self.model.config, "_attn_implementation", None),
                "cpu_linear": self.cpu_linear,
            }
            if self.compile:  # only when asked for, so fingerprints of eager models are unchanged
                self._fingerprint["compile"] = "torch.compile(dynamic=True)"
                self._fingerprint["scoring_padding"] = self.scoring_padding
            if self.device.startswith("cuda"):  # how temperature > 0 draws there (a CPU's draws are unchanged)
                self._fingerprint["sampler"] = SAMPLER
            if self.auto_batch_size is not None:  # only when asked for, as below
                self._fingerprint["batch_size_auto"] = self.auto_batch_size
                if self.sizer.fixed is None:  # CUDA: each shape's batch from its longest row (hf_batch)
                    self._fingerprint["batch_size_rule"] = BATCH_RULE
            if self._template_kwargs:  # only when set, so fingerprints of plain models are unchanged
                self._fingerprint["chat_template_kwargs"] = dict(self._template_kwargs)
        return dict(self._fingerprint)

    def sort_key(self, request: Request) -> tuple[str, int, tuple[Any, ...]]:
        """Executor hook (see ``auditlang.execute.executor``): the order of a stage's requests.
        By kind, except that ``choice_logprobs`` and ``generate`` requests (greedy or sampled,
        any budget) form one class (requests of one prompt then land in one commit batch and
        share one prefill); within a class by prompt length in characters, then by prompt, so
        requests of one prompt are adjacent (equal keys: the executor keeps them in one commit
        batch) and every commit batch holds prompts of similar length (little padding, as if the
        whole stage were sorted by length)."""
        cls = "choice_logprobs+generate" if request.kind in ("choice_logprobs", "generate") else request.kind
        p = request.prompt
        if p.text is not None:
            return (cls, len(p.text), (0, p.text))
        msgs = tuple((m.role, m.content) for m in p.messages or ())  # (1, ...): never compared with a text
        return (cls, sum(len(c) for _, c in msgs), (1, msgs))

    def work_counters(self) -> dict[str, int]:
        """Executor hook: the generation loop's cumulative counters (``GenStats``: forwards,
        prefilled prompts, padded prefill tokens, decoding row-steps, generated tokens, refills,
        row-steps); the executor reports their change per stage (run.json ``engine_work``)."""
        d = self.gen_stats.as_dict()
        out = {k: int(v) for k, v in d.items() if k != "row_steps_per_token"}
        out["oom_halvings"] = len(self.sizer.halvings)
        return out

    def batch_sizing(self) -> dict[str, Any]:
        """Runner hook (run.json ``batch_sizing``): each work shape's starting and current batch,
        and every halving after running out of memory (engines/hf_batch.py)."""
        return self.sizer.summary()

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Validate all requests (EngineError for misconfiguration, e.g. chat messages for a
        base model), then execute them batched by kind. Per-request failures become
        ``Result.error``."""
        reqs = list(requests)
        return self._run(reqs, self._encode_all([r.prompt for r in reqs]))

    def _encode_all(self, prompts: list[Prompt]) -> list[list[int] | Exception]:
        """``encode_prompt`` for many prompts: rendered one by one, tokenized in two batched
        calls (raw text with special tokens, rendered chats without)."""
        out: list[list[int] | Exception] = []
        texts: dict[bool, list[tuple[int, str]]] = {True: [], False: []}
        for i, p in enumerate(prompts):
            try:
                texts[p.text is not None].append((i, self.render_prompt(p)))
                out.append([])
            except EngineError:
                raise
            except Exception as e:  # noqa: BLE001  (a chat template that rejects these messages, ...)
                out.append(e)
        for special, items in texts.items():
            if items:
                ids = self.tokenizer([t for _, t in items], add_special_tokens=special)["input_ids"]
                for (i, _), row in zip(items, ids):
                    # a fast tokenizer's rows are lists of Python ints already (no per-token copy)
                    out[i] = row if type(row) is list else [int(x) for x in row]
        return out

    def close(self) -> None:
        self.model = None
        self._compiled = None
        gc.collect()
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()

    # -- prompts

    def _chat_template(self) -> str | None:
        return chat_template_of(self.tokenizer)

    def render_prompt(self, prompt: Prompt) -> str:
        """The text the model sees (before tokenization): engines/params.py's rule, shared with vllm."""
        return render_chat_prompt(self.tokenizer, self.config, prompt, self._template_kwargs)

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Prompt token ids: raw text with the tokenizer's special tokens; a rendered chat
        without adding any (the template writes them)."""
        text = self.render_prompt(prompt)
        ids = self.tokenizer(text, add_special_tokens=prompt.text is not None)["input_ids"]
        return [int(i) for i in ids]

    def token_str(self, token_id: int) -> str:
        s = self._token_str.get(token_id)
        if s is None:
            s = self.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self._token_str[token_id] = s
        return s

    def _window(self, ids: Sequence[int], lps: Sequence[float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for i, lp in zip(ids, lps):
            out.setdefault(self.token_str(int(i)), float(lp))
        return out

    # -- execution

    def _run(self, reqs: list[Request], encoded: list[list[int] | Exception]) -> Iterator[Result]:
        handlers: dict[str, Callable[[list[int], list[Request], list[list[int]]], Iterator[Result]]] = {
            "continuation_logprobs": self._do_continuation,
            "constrained_choice": self._do_constrained,
            "hidden_states": self._do_hidden,
        }
        good: dict[str, list[int]] = {kind: [] for kind in REQUEST_KINDS}
        for i, req in enumerate(reqs):
            enc = encoded[i]
            if isinstance(enc, Exception):
                yield _error(req, f"prompt could not be rendered: {type(enc).__name__}: {enc}")
            elif not enc:
                yield _error(req, "the prompt encodes to zero tokens")
            elif self.max_positions and len(enc) >= self.max_positions:
                yield _error(req, f"the prompt has {len(enc)} tokens; the model's context is {self.max_positions}")
            else:
                good[req.kind].append(i)
        # choice_logprobs requests riding on a greedy generation of the same encoded prompt
        choice_rows: list[_Row] = []
        if good["choice_logprobs"]:
            choice_rows = yield from self._choice_rows(good["choice_logprobs"], reqs, encoded)  # type: ignore[arg-type]
        riders, alone = self._pair_riders(choice_rows, good["generate"], reqs, encoded)  # type: ignore[arg-type]
        rider_out: dict[int, Any] = {}
        for kind in REQUEST_KINDS:
            if kind == "generate":
                if good[kind]:
                    yield from self._do_generate(good[kind], reqs, encoded, riders, rider_out)  # type: ignore[arg-type]
                for rows in riders.values():  # a generation batch that failed before step 0: forward alone
                    for r in rows:
                        if id(r) in rider_out:
                            yield self._choice_result(reqs[r.owner], r, rider_out[id(r)])
                        else:
                            alone.append(r)
            elif kind == "choice_logprobs":
                yield from self._choice_from_rows(alone, reqs)
            elif good[kind]:
                yield from handlers[kind](good[kind], reqs, encoded)  # type: ignore[arg-type]

    def _pair_riders(self, rows: list[_Row], gen_idx: list[int], reqs: list[Request],
                     enc: list[list[int]]) -> tuple[dict[int, list[_Row]], list[_Row]]:
        """Attach each choice row to the first well-formed generate request (greedy or sampled:
        its prefill's log-softmax is raw, whatever the sampling parameters) with the same encoded
        prompt: ``{generate index: [choice rows]}``, and the rows with no such partner."""
        if not rows:
            return {}, []
        partner: dict[tuple[int, ...], int] = {}
        for i in gen_idx:
            if _parses(reqs[i]):
                partner.setdefault(tuple(enc[i]), i)
        riders: dict[int, list[_Row]] = {}
        alone: list[_Row] = []
        for r in rows:
            g = partner.get(tuple(r.prompt))
            if g is None:
                alone.append(r)
            else:
                riders.setdefault(g, []).append(r)
        return riders, alone

    def _forward(self, rows: list[list[int]], keep: int, hidden: bool = False) -> tuple[Any, Any]:
        """Scoring forward pass; float32 log-softmax of the last ``keep`` positions of each row
        (left on the device; callers gather what they need and copy it to the host once). Left
        padded, or right padded without a mask (``scoring_padding``, hf_scoring.forward_right)."""
        torch = self._torch
        if self.scoring_padding == "right":
            return hf_scoring.forward_right(torch, self.model, self._scoring_model(), rows, keep, self.pad_id, self.device, hidden)
        ids, mask, pos = self._pad([r for r in rows])
        with torch.inference_mode():
            out = self._scoring_model()(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device), position_ids=pos.to(self.device),
                logits_to_keep=keep, output_hidden_states=hidden, use_cache=False,
            )
            lps = torch.log_softmax(out.logits[:, -keep:, :].float(), dim=-1)
        return lps, (out.hidden_states if hidden else None)

    def _scoring_model(self) -> Any:
        """The model scoring passes run: ``self.model``, or with ``compile=true`` the
        ``torch.compile(dynamic=True)`` wrapper of it (left padding) or of its decoder (right
        padding, hf_scoring), made on first use (one graph serves every batch shape; the first
        batches pay the compile, 80-150 s for an 8B model on an H100)."""
        target = self.model.get_decoder() if self.scoring_padding == "right" else self.model
        if not self.compile:
            return target
        if self._compiled is None or self._compiled[0] is not self.model:
            self._compiled = (self.model, self._torch.compile(target, dynamic=True))
        return self._compiled[1]

    def _compile_now(self) -> None:
        """``compile=true`` (CUDA only, checked before the weights load: on a CPU, inductor does not
        lower the pre-packed oneDNN linears, and compiling SmolLM2 took minutes on the project's
        2-core machine). Models :func:`hf_scoring.ineligible` accepts score right-padded without
        a mask (SDPA's causal flash path). Compiles at load with one small batch, so a model
        torch.compile cannot handle stops the run here with the reason instead of failing every
        request."""
        why_not = hf_scoring.ineligible(self.model)
        if why_not is None:
            hf_scoring.register(self._transformers)
            self.scoring_padding = "right"
        else:
            log.info("model %s: compiled scoring keeps left padding (%s)", self.config.name, why_not)
        try:
            self._forward([[self.pad_id] * 8, [self.pad_id] * 6], keep=1)
        except Exception as e:  # noqa: BLE001 - dynamo/inductor raise many types
            raise EngineError(f"torch.compile failed at load ({type(e).__name__}: {str(e)[:300]})",
                              hint="set compile=false for this model") from e

    def _pad(self, rows: list[list[int]]) -> tuple[Any, Any, Any]:
        """Left padding: ids, attention mask, position ids (cumulative mask - 1)."""
        torch = self._torch
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r):] = 1
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def _topk_host(self, lp: Any, k: int) -> tuple[list[Any], list[Any]]:
        """Top-k ids and values of the last dimension, copied to the host in one go."""
        vals, ids = self._torch.topk(lp, min(k, lp.shape[-1]), dim=-1)
        return ids.cpu().tolist(), vals.cpu().tolist()

    def _scored(self, rows: list[_Row], keep_of: Callable[[_Row], int],
                fn: Callable[[list[_Row]], dict[int, Any]]) -> Iterator[tuple[list[_Row], dict[int, Any]]]:
        """``(batch, outputs)`` per scoring batch: ``rows`` cut by :meth:`_chunks` at the batch of
        their shape (the longest row's bucket, ``self.sizer``), each run by :meth:`_isolated`."""
        if not rows:
            return
        key = self.sizer.key("score", max(len(r.prompt) + len(r.cont) for r in rows))
        for batch in self._chunks(rows, keep_of, cap=self.sizer.cap(key)):
            yield batch, self._isolated(batch, fn, key)

    def _chunks(self, rows: list[_Row], keep_of: Callable[[_Row], int],
                steps_of: Callable[[_Row], int] | None = None, cap: int | None = None) -> Iterator[list[_Row]]:
        """Rows sorted by length, cut into contiguous batches of at most ``cap`` (batch_size) rows and at
        most ``logits_budget`` kept logit values, choosing the cuts that minimise padded tokens
        plus a fixed cost per forward pass (``_batch_cost`` token-equivalents; ``steps_of``: the
        decoding steps a row adds after its prompt forward, each paying that cost again). On a CPU
        the padding dominates, so a batch is cut where the lengths jump; on a GPU the per-pass
        cost does, and batches stay full."""
        order = sorted(rows, key=lambda r: (len(r.prompt) + len(r.cont), r.owner, r.sample))
        n, c = len(order), self._batch_cost
        cap = max(1, int(cap or self.config.batch_size))
        length = [len(r.prompt) + len(r.cont) for r in order]
        keeps = [keep_of(r) for r in order]
        extra = [steps_of(r) for r in order] if steps_of else [0] * n
        best = [0.0] + [float("inf")] * n
        cut = [0] * (n + 1)
        for j in range(1, n + 1):
            keep = steps = 0
            for i in range(j - 1, max(0, j - cap) - 1, -1):  # batch order[i:j], growing leftwards
                keep = max(keep, keeps[i])
                steps = max(steps, extra[i])
                if i < j - 1 and (j - i) * keep * self._vocab > self._budget:
                    break
                cost = best[i] + (j - i) * length[j - 1] + c * (1 + steps)
                if cost < best[j]:
                    best[j], cut[j] = cost, i
        bounds: list[tuple[int, int]] = []
        j = n
        while j:
            bounds.append((cut[j], j))
            j = cut[j]
        rows_of: dict[int, int] = {}
        for r in rows:
            rows_of[r.owner] = rows_of.get(r.owner, 0) + 1
        for i, j in reversed(bounds):
            yield order[i:j]  # resumed once the caller has run this batch
            report_progress(self, sum(1.0 / rows_of[r.owner] for r in order[i:j]))

    def _isolated(self, batch: list[_Row], fn: Callable[[list[_Row]], dict[int, Any]], key: str) -> dict[int, Any]:
        """Run a batch, at most the current batch of shape ``key`` at a time. A part that runs out
        of memory is freed, halved and run again (down to one row; the halved size is kept for
        the shape, engines/hf_batch.py); a part that fails otherwise reruns its rows one by one,
        so one bad row fails alone. Returns ``id(row)`` -> output, or the Exception that row raised."""
        cap = self.sizer.cap(key)
        if len(batch) > cap:
            out: dict[int, Any] = {}
            for i in range(0, len(batch), cap):
                out.update(self._isolated(batch[i:i + cap], fn, key))
            return out
        try:
            return fn(batch)
        except Exception as e:  # noqa: BLE001 - turned into Result.error
            failed = e
        if is_oom(failed) and len(batch) > 1:
            release(failed, self._torch, self.device)
            self.sizer.halve(key, len(batch))
            return self._isolated(batch, fn, key)
        if is_oom(failed):
            release(failed, self._torch, self.device)
        else:
            drop_frames(failed)
        if len(batch) == 1:
            return {id(batch[0]): failed}
        out = {}
        for r in batch:
            out.update(self._isolated([r], fn, key))
        return out

    def _label_ids(self, text: str) -> list[int]:
        ids = self._label_cache.get(text)
        if ids is None:
            ids = label_token_ids(self.tokenizer, text)
            if len(self._label_cache) < 100_000:
                self._label_cache[text] = ids
        return ids

    # choice_logprobs ---------------------------------------------------------

    def _choice_rows(self, idx: list[int], reqs: list[Request], enc: list[list[int]]) -> Iterator[Result]:
        """Yields error results for malformed requests; returns the rows of the others."""
        rows: list[_Row] = []
        for i in idx:
            try:
                choices = _str_list(reqs[i].p, "choices")
                k = _int(reqs[i].p, "top_logprobs", 0, lo=0)
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            label_ids = {c: self._label_ids(c) for c in choices}
            empty = [c for c, ids in label_ids.items() if not ids]
            if empty:
                yield _error(reqs[i], f"choice {empty[0]!r} encodes to zero tokens")
                continue
            rows.append(_Row(i, enc[i], extra=(label_ids, k)))
        return rows

    def _choice_from_rows(self, rows: list[_Row], reqs: list[Request]) -> Iterator[Result]:
        for batch, outs in self._scored(rows, lambda r: 1, self._choice_batch):
            for r in batch:
                yield self._choice_result(reqs[r.owner], r, outs[id(r)])

    def _choice_batch(self, batch: list[_Row]) -> dict[int, Any]:
        lps, _ = self._forward([r.prompt for r in batch], keep=1)
        return self._pick_labels(lps[:, -1], batch)

    def _pick_labels(self, lp: Any, batch: list[_Row]) -> dict[int, Any]:
        """From next-token log-softmax rows (``lp[i]`` belongs to ``batch[i]``): id(row) ->
        (label first-token logprobs, top-k ids, top-k values)."""
        torch = self._torch
        width = max(len(r.extra[0]) for r in batch)
        index = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):
            index[i, : len(r.extra[0])] = torch.tensor([ids[0] for ids in r.extra[0].values()])
        picked = lp.gather(1, index.to(lp.device)).cpu().tolist()
        k = max(r.extra[1] for r in batch)
        top_ids, top_vals = self._topk_host(lp, k) if k else ([[]] * len(batch), [[]] * len(batch))
        return {id(r): (picked[i], top_ids[i], top_vals[i]) for i, r in enumerate(batch)}

    def _choice_result(self, req: Request, row: _Row, out: Any) -> Result:
        if isinstance(out, Exception):
            return _error(req, f"{type(out).__name__}: {out}")
        label_ids, k = row.extra
        picked, top_ids, top_vals = out
        first = {c: ids[0] for c, ids in label_ids.items()}
        result = Result(request_id=req.id, kind=req.kind, choice_logprobs={c: float(v) for c, v in zip(first, picked)})
        result.top_logprobs = self._window(top_ids[:k], top_vals[:k])
        result.meta = {"prompt_tokens": len(row.prompt), "label_token_ids": first}
        multi = [c for c, ids in label_ids.items() if len(ids) > 1]
        shared = sorted({c for c in first for d in first if c != d and first[c] == first[d]})
        if multi:
            result.meta["multi_token_labels"] = multi  # only their first token is scored
        if shared:
            result.meta["labels_sharing_first_token"] = shared
        return result

    # continuation_logprobs / constrained_choice ----------------------------------

    def _teacher_forced(self, rows: list[_Row]) -> dict[int, Any]:
        """id(row) -> (continuation logprobs, top-k ids per position, top-k values per position)."""
        out: dict[int, Any] = {}
        for _, outs in self._scored(rows, lambda r: len(r.cont), self._tf_batch):
            out.update(outs)
        return out

    def _tf_batch(self, batch: list[_Row]) -> dict[int, Any]:
        torch = self._torch
        keep = max(len(r.cont) for r in batch)
        # feed prompt + continuation[:-1]: the last m positions predict the m continuation tokens
        lps, _ = self._forward([r.prompt + r.cont[:-1] for r in batch], keep=keep)
        index = torch.zeros((len(batch), keep), dtype=torch.long)
        for i, r in enumerate(batch):
            index[i, keep - len(r.cont):] = torch.tensor(r.cont)
        picked = lps.gather(2, index.to(lps.device)[:, :, None])[:, :, 0].cpu().tolist()
        k = max(int(r.extra or 0) for r in batch)
        top_ids, top_vals = self._topk_host(lps, k) if k else (None, None)
        out: dict[int, Any] = {}
        for i, r in enumerate(batch):
            m = len(r.cont)
            tops = (top_ids[i][keep - m:], top_vals[i][keep - m:]) if top_ids is not None else None
            out[id(r)] = (picked[i][keep - m:], tops)
        return out

    def _do_continuation(self, idx: list[int], reqs: list[Request], enc: list[list[int]]) -> Iterator[Result]:
        rows: list[_Row] = []
        for i in idx:
            try:
                cont = self._label_ids(_str(reqs[i].p, "continuation"))
                k = _int(reqs[i].p, "top_logprobs", 0, lo=0)
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            if not cont:
                yield _error(reqs[i], "the continuation encodes to zero tokens")
                continue
            rows.append(_Row(i, enc[i], cont, extra=k))
        outs = self._teacher_forced(rows)
        for r in rows:
            req, got = reqs[r.owner], outs[id(r)]
            if isinstance(got, Exception):
                yield _error(req, f"{type(got).__name__}: {got}")
                continue
            chosen, tops = got
            k = int(r.extra)
            toks = [
                TokenLogprob(self.token_str(t), t, float(v), self._window(tops[0][j][:k], tops[1][j][:k]) if k else {})
                for j, (t, v) in enumerate(zip(r.cont, chosen))
            ]
            yield Result(request_id=req.id, kind=req.kind, continuation=toks,
                         meta={"prompt_tokens": len(r.prompt), "sum_logprob": float(sum(chosen))})

    def _do_constrained(self, idx: list[int], reqs: list[Request], enc: list[list[int]]) -> Iterator[Result]:
        rows: list[_Row] = []
        per_req: dict[int, list[tuple[str, _Row]]] = {}
        for i in idx:
            try:
                choices = _str_list(reqs[i].p, "choices")
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            pairs = [(c, _Row(i, enc[i], self._label_ids(c), sample=j)) for j, c in enumerate(choices)]
            empty = [c for c, r in pairs if not r.cont]
            if empty:
                yield _error(reqs[i], f"choice {empty[0]!r} encodes to zero tokens")
                continue
            per_req[i] = pairs
            rows.extend(r for _, r in pairs)
        outs = self._teacher_forced(rows)
        for i, pairs in per_req.items():
            req = reqs[i]
            bad = [outs[id(r)] for _, r in pairs if isinstance(outs[id(r)], Exception)]
            if bad:
                yield _error(req, f"{type(bad[0]).__name__}: {bad[0]}")
                continue
            scores = {c: float(sum(outs[id(r)][0])) for c, r in pairs}
            best = max(scores, key=lambda c: scores[c])  # first of equal maxima (dict order = choice order)
            yield Result(request_id=req.id, kind=req.kind, choice=best,
                         meta={"prompt_tokens": len(pairs[0][1].prompt), "choice_scores": scores,
                               "rule": "argmax of summed token logprobs of each choice (teacher forcing)"})

    # hidden_states ---------------------------------------------------------

    def _do_hidden(self, idx: list[int], reqs: list[Request], enc: list[list[int]]) -> Iterator[Result]:
        n_states = int(self.model.config.num_hidden_layers) + 1
        rows: list[_Row] = []
        for i in idx:
            try:
                layer = _int(reqs[i].p, "layer", -1)
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            if not -n_states <= layer < n_states:
                yield _error(reqs[i], f"layer {layer} out of range: this model has {n_states} hidden states (0 = embeddings, -1 = last)")
                continue
            rows.append(_Row(i, enc[i], sample=layer % n_states))
        for batch, outs in self._scored(rows, lambda r: 1, self._hidden_batch):
            for r in batch:
                req, h = reqs[r.owner], outs[id(r)]
                if isinstance(h, Exception):
                    yield _error(req, f"{type(h).__name__}: {h}")
                    continue
                yield Result(request_id=req.id, kind=req.kind, hidden_state=h,
                             meta={"prompt_tokens": len(r.prompt), "layer": r.sample, "num_hidden_states": n_states})

    def _hidden_batch(self, batch: list[_Row]) -> dict[int, Any]:
        _, hs = self._forward([r.prompt for r in batch], keep=1, hidden=True)
        states = self._torch.stack([hs[r.sample][i, -1] for i, r in enumerate(batch)]).float().cpu().tolist()
        return {id(r): states[i] for i, r in enumerate(batch)}

    # generate ---------------------------------------------------------------

    def _do_generate(self, idx: list[int], reqs: list[Request], enc: list[list[int]],
                     riders: dict[int, list[_Row]] | None = None, rider_out: dict[int, Any] | None = None) -> Iterator[Result]:
        """``riders``: choice rows served from step 0 of the greedy request they are attached to;
        their outputs land in ``rider_out`` (id(row) -> output), absent when the batch failed first.
        Generation runs in :mod:`auditlang.engines.hf_generate` (continuous batching)."""
        riders = riders or {}
        rider_out = rider_out if rider_out is not None else {}
        units: list[GenUnit] = []
        specs: dict[int, _GenSpec] = {}
        for i in idx:
            try:
                spec = _GenSpec.parse(reqs[i])
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            room = (self.max_positions - len(enc[i])) if self.max_positions else spec.max_tokens
            spec.clamped = spec.max_tokens > room
            spec.max_tokens = min(spec.max_tokens, room)
            specs[i] = spec
            # greedy samples are identical: compute one and copy it n times. Every request of one
            # encoded prompt shares that prompt's one prefill (hf_generate groups them)
            units.append(GenUnit(i, enc[i], [0] if spec.greedy else list(range(spec.n)), spec))
        samples: dict[tuple[int, int], Any] = {}
        before = GenStats(**{k: v for k, v in self.gen_stats.__dict__.items()})
        if units:  # the shape: the longest row a unit may grow to (prompt + max_tokens)
            key = self.sizer.key("generate", max(len(u.prompt) + u.spec.max_tokens for u in units))
            self._generate_units(units, self.sizer.cap(key), key, riders, rider_out, samples)
        self._log_stats(before)
        for i, spec in specs.items():
            req = reqs[i]
            got = [samples[(i, 0 if spec.greedy else s)] for s in range(spec.n)]
            bad = [g for g in got if isinstance(g, Exception)]
            if bad:
                yield _error(req, f"{type(bad[0]).__name__}: {bad[0]}")
                continue
            out = [copy.deepcopy(g) for g in got] if spec.greedy and spec.n > 1 else got
            meta: dict[str, Any] = {"prompt_tokens": len(enc[i]), "completion_tokens": [len(s.tokens) for s in out]}  # type: ignore[union-attr]
            if spec.clamped:
                meta["max_tokens_clamped_to"] = spec.max_tokens
            yield Result(request_id=req.id, kind=req.kind, samples=out, meta=meta)  # type: ignore[arg-type]

    def _generate_units(self, units: list[GenUnit], cap: int, key: str, riders: dict[int, list[_Row]],
                        rider_out: dict[int, Any], out: dict[tuple[int, int], Any]) -> None:
        """Generate every unit into ``out``; when a batch fails, the units it left unfinished run
        again (samples that finished are kept): after running out of memory freed and with half
        the rows (the size kept for shape ``key``, engines/hf_batch.py), down to one row; after
        another failure one by one (so one bad prompt fails alone, as ``Result.error``)."""
        if not units:
            return
        try:
            self._generate_batch(units, cap, riders, rider_out, out)
            return
        except Exception as e:  # noqa: BLE001 - turned into Result.error below
            failed = e
        rest = [u for u in units if any((u.owner, s) not in out or isinstance(out[(u.owner, s)], Exception) for s in u.samples)]
        for u in rest:
            for s in u.samples:
                out.pop((u.owner, s), None)
        live = min(cap, sum(len(u.samples) for u in units))  # the rows the failed batch could hold
        if is_oom(failed) and live > 1:
            release(failed, self._torch, self.device)
            self._generate_units(rest, self.sizer.halve(key, live), key, riders, rider_out, out)
            return
        if is_oom(failed):
            release(failed, self._torch, self.device)
        else:
            drop_frames(failed)
        if len(rest) == 1 and len(units) == 1:
            for s in rest[0].samples:
                out[(rest[0].owner, s)] = failed
            return
        for u in rest:
            self._generate_units([u], cap, key, riders, rider_out, out)

    def _generate_batch(self, units: list[GenUnit], cap: int, riders: dict[int, list[_Row]] | None,
                        rider_out: dict[int, Any], out: dict[tuple[int, int], Any]) -> None:
        """Continuous-batching generation of ``units`` with at most ``cap`` live rows (see
        :mod:`auditlang.engines.hf_generate`); samples land in ``out`` as they finish."""
        Decoder(self, cap, riders or {}, rider_out, self.gen_stats, out).run(units)

    def _log_stats(self, before: GenStats) -> None:
        s, b = self.gen_stats, before
        rows = s.row_steps - b.row_steps
        toks = s.generated_tokens - b.generated_tokens
        if toks:
            log.info("hf generate: %d tokens, %d row-steps (%.3f per token), %d forwards, %d prompts prefilled",
                     toks, rows, rows / toks, s.forwards - b.forwards, s.prefill_rows - b.prefill_rows)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _hit_stop(self, st: "_GenState", stops: tuple[str, ...]) -> bool:
        """Stop strings are matched on the decoded text; the text is cut before the stop."""
        text = self._decode(st.ids)
        cut = [text.find(s) for s in stops if s and s in text]
        if cut:
            st.text = text[: min(cut)]
            return True
        return False


@functools.lru_cache(maxsize=None)
def _packed_linear_class(torch: Any) -> type:
    class PackedLinear(torch.nn.Module):
        """A float32 ``nn.Linear`` whose weight is pre-packed for oneDNN (see HFEngine._pack_linears)."""

        def __init__(self, weight: Any, bias: Any, in_features: int, out_features: int) -> None:
            super().__init__()
            self.register_buffer("packed_weight", weight, persistent=False)
            self.register_buffer("bias", bias, persistent=False)
            self.in_features, self.out_features = in_features, out_features

        def forward(self, x: Any) -> Any:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")

    return PackedLinear


def _packed_linear(torch: Any, lin: Any) -> Any:
    """``lin`` as a PackedLinear (weight reordered once for oneDNN; 1024: the row-count hint)."""
    w = torch.ops.mkldnn._reorder_linear_weight(lin.weight.detach(), 1024)
    b = None if lin.bias is None else lin.bias.detach()
    return _packed_linear_class(torch)(w, b, lin.in_features, lin.out_features)


def _parses(req: Request) -> bool:
    """A well-formed generate request (one the decoder will prefill)."""
    try:
        _GenSpec.parse(req)
        return True
    except (ValueError, TypeError):
        return False


