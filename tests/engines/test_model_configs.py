"""Spec models reach every engine exactly as declared (issue 16, item 1).

For every model declared in specs/, examples/, stdlib/ and the README, the configuration the
resolver builds (``resolve/models.py``, the one rule) must be accepted by the engine's own
option parser, without loading a model; language option names are mapped to the engine's names
and defaults the user did not write are not sent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from auditlang.engines.registry import check_config
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config

REPO = Path(__file__).resolve().parents[2]
SPEC_FILES = sorted(p for d in ("specs", "examples", "stdlib") for p in (REPO / d).glob("*.audit"))


def _readme_spec(tmp_path: Path) -> Path:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```audit\n(import \"stdlib/s000\".*?)^```", text, re.S | re.M).group(1)
    p = tmp_path / "readme.audit"
    p.write_text(block, encoding="utf-8")
    return p


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_declared_model_config_is_accepted_by_its_engine(path: Path) -> None:
    spec = compile_spec(path)
    for mid in spec.of_kind("model"):
        check_config(model_config(spec, mid))


def test_readme_vllm_model_loads_its_options(tmp_path: Path) -> None:
    spec = compile_spec(_readme_spec(tmp_path))
    cfg = model_config(spec, "llama3b")
    assert cfg.engine == "vllm" and cfg.options == {}  # nothing written, nothing sent
    check_config(cfg)


def test_language_names_are_mapped_and_unwritten_defaults_not_sent(tmp_path: Path) -> None:
    p = tmp_path / "m.audit"
    p.write_text(
        'model a = vllm("org/m", tensor_parallel=2, enforce_eager=true, max_logprobs=50, gpu_memory_utilization=0.8, '
        'in_process=true)\n'
        'model b = vllm("org/m")\n'
        'model f = vllm("org/m", prefix_caching=off)\n'
        'model c = openai("gpt-x", base_url="http://127.0.0.1:9/v1")\n'
        'model d = openai("gpt-x")\n'
        'model e = embedded("smollm2-135m-instruct", engine=vllm)\n', encoding="utf-8")
    spec = compile_spec(p)
    a = model_config(spec, "a")
    assert a.options == {"tensor_parallel_size": 2, "enforce_eager": True, "max_logprobs": 50,
                         "gpu_memory_utilization": 0.8, "in_process": True}
    assert model_config(spec, "b").options == {}  # vLLM's own defaults (eager on CPU) apply
    assert model_config(spec, "c").options == {"base_url": "http://127.0.0.1:9/v1"}
    assert model_config(spec, "d").options == {}  # the engine reads OPENAI_BASE_URL, else its default
    assert model_config(spec, "e").engine == "vllm"
    assert model_config(spec, "f").options == {"enable_prefix_caching": False}  # spec prefix_caching -> vLLM's name
    for mid in "abcdef":
        check_config(model_config(spec, mid))
    # `auditc run --engine hf` on a vLLM model: the vLLM options do not follow it
    assert model_config(spec, "a", engine_override="hf").options == {}
    check_config(model_config(spec, "a", engine_override="hf"))


def test_the_openai_server_is_one_rule(tmp_path: Path, monkeypatch) -> None:
    """Declared base_url, else $OPENAI_BASE_URL, else OpenAI's: the configuration, the consent
    check and the engine read the one rule (core/engine_options.py ``openai_base_url``), so the
    environment is applied once and all three name the same server (issue 37)."""
    from auditlang.core.engine_options import OPENAI_DEFAULT_URL
    from auditlang.engines.openai_engine import _Options
    from auditlang.execute.access import run_access

    p = tmp_path / "m.audit"
    (tmp_path / "d.jsonl").write_text('{"id": "q", "question": "?", "choices": ["a", "b"], "answer_index": 0}\n', encoding="utf-8")
    p.write_text('import "stdlib/s000"\ndataset ds = jsonl("d.jsonl", task=multiple_choice)\n'
                 'model c = openai("gpt-x", base_url="http://127.0.0.1:9/v1")\nmodel d = openai("gpt-x")\n'
                 'audit a {\n  models = [c, d]\n  datasets = [ds]\n  variants = [s000.surface_paraphrase]\n'
                 '  protocols = [s000.verbal_decimal]\n}\n', encoding="utf-8")
    spec = compile_spec(p)
    for env, want_d, src_d in ((None, OPENAI_DEFAULT_URL, "default"), ("http://10.0.0.7:1/v1", "http://10.0.0.7:1/v1",
                                                                        "environment")):
        if env:
            monkeypatch.setenv("OPENAI_BASE_URL", env)
        else:
            monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        access = {a.model: (a.url, a.url_from) for a in run_access(spec)}
        assert access == {"c": ("http://127.0.0.1:9/v1", "spec"), "d": (want_d, src_d)}
        for mid, url in (("c", "http://127.0.0.1:9/v1"), ("d", want_d)):
            assert _Options.parse(model_config(spec, mid)).base_url == url
