"""``auditc show``: the exact prompts of a cell's requests for one item, golden outputs on the
README quickstart (one token and one verbal cell), with and without a local tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "examples" / "quickstart_full.audit")
GOLDENS = Path(__file__).parent / "goldens"
TOKEN_CELL = "quickstart/smollm2/capitals/s000.surface_paraphrase/s000.token_norm/s000.first_char"
VERBAL_CELL = "quickstart/gemma3/arithmetic/s000.implicit_framing/s000.verbal_decimal/s000.regex_reparse"


def _show(capsys, *args: str) -> str:
    rc = main(["show", QUICKSTART, *args])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


@pytest.mark.parametrize("name,cell,item", [("token", TOKEN_CELL, "0"), ("verbal", VERBAL_CELL, "2")])
def test_show_without_a_tokenizer(name, cell, item, tmp_path: Path, monkeypatch, capsys, golden) -> None:
    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))  # no converted checkpoint: messages shown role-tagged
    out = _show(capsys, cell, "--item", item)
    golden(GOLDENS / f"show_{name}_no_tokenizer.txt", out)
    assert "no tokenizer available locally" in out or name == "verbal"  # gemma3 gets raw-text prompts


def _converted(name: str) -> bool:
    from auditlang.engines import embedded

    d = embedded.checkpoint_dir(name)
    return embedded.read_provenance(d) is not None and (d / "config.json").is_file()


@pytest.mark.parametrize("name,cell,item,model", [("token", TOKEN_CELL, "0", "smollm2-135m-instruct"),
                                                  ("verbal", VERBAL_CELL, "2", "gemma3-270m")])
def test_show_with_the_checkpoint_tokenizer(name, cell, item, model, capsys, golden) -> None:
    pytest.importorskip("transformers")
    if not _converted(model):
        pytest.skip(f"embedded {model} is not converted on this machine (`auditc run` converts it once)")
    out = _show(capsys, cell, "--item", item)
    golden(GOLDENS / f"show_{name}_tokenizer.txt", out)
    assert "(no weights loaded)" in out


def test_show_glob_lists_every_matching_cell(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    out = _show(capsys, "*/smollm2/capitals/*/*token_norm*/*", "--limit", "2")
    cells = [ln.split()[1] for ln in out.splitlines() if ln.startswith("cell ")]
    assert len(cells) == 4 and all("/smollm2/capitals/" in c and "token_norm" in c for c in cells)
    assert "item 0 of 2 sampled" in out


def test_show_no_match_is_a_usage_error_with_did_you_mean(capsys) -> None:
    assert main(["show", QUICKSTART, "quickstart/smollm3/*"]) == 2
    assert "did you mean 'smollm2'" in capsys.readouterr().err
    assert main(["show", QUICKSTART, "*/s000.token_nrm/*"]) == 2
    assert "did you mean 's000.token_norm'" in capsys.readouterr().err
    assert main(["show", QUICKSTART, TOKEN_CELL, "--item", "60"]) == 2
    assert "has 60 item(s) (0..59)" in capsys.readouterr().err


def test_show_renders_what_the_hf_engine_renders(capsys) -> None:
    """The chat text ``show`` prints is the hf engine's own rendering of the same request (its
    ``render_prompt`` on the same tokenizer; no weights loaded here either)."""
    pytest.importorskip("transformers")
    if not _converted("smollm2-135m-instruct"):
        pytest.skip("embedded smollm2-135m-instruct is not converted on this machine")
    from auditlang.api import plan_spec
    from auditlang.cli.show import local_tokenizer
    from auditlang.engines.hf import HFEngine
    from auditlang.resolve import compile_spec
    from auditlang.resolve.models import model_config

    spec = compile_spec(QUICKSTART)
    plan = plan_spec(spec, limit=1)
    req = plan.units[("quickstart", "smollm2", "capitals", "s000.surface_paraphrase", "test")].stage1["s000.token_norm"][0]["answer"]
    engine = object.__new__(HFEngine)
    engine.config, engine._template_kwargs = model_config(spec, "smollm2"), {}
    engine.tokenizer = local_tokenizer(spec, "smollm2")[0]
    expected = engine.render_prompt(req.prompt)
    out = _show(capsys, TOKEN_CELL, "--limit", "1")
    shown = "\n".join(ln[len("    │"):] for ln in out.splitlines() if ln.startswith("    │"))
    assert shown == expected and expected.startswith("<|im_start|>")
    n = len(engine.tokenizer(expected, add_special_tokens=False)["input_ids"])
    assert f"{n} tokens" in out
