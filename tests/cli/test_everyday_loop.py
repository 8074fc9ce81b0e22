"""The everyday loop (issue 14): help for every command, plain progress lines in logs, plan
estimates without data, --swap-model, the shared response cache, and unchanged reruns that
load no model. User path: spec files on disk, `auditc` through ``main([...])``, dry-run engine."""

from __future__ import annotations

import argparse
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from auditlang.cli import build_parser, main
from auditlang.execute.progress import ExecProgress

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "examples" / "quickstart_full.audit"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


# -- help and docs -------------------------------------------------------------------------

def test_top_help_lists_exit_codes(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "3 ", "70 ", "130 "):
        assert f"\n  {code}" in out
    for name in _subcommands():
        assert name in out


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_help_has_description_examples_and_documented_flags(name: str, capsys) -> None:
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    parser = _subcommands()[name]
    assert parser.description and "examples:" in out and f"auditc {name}" in out.split("examples:")[1]
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"`auditc {name} " in docs
    for action in parser._actions:
        if action.dest == "help":
            continue
        if not action.option_strings:  # positionals have help text
            assert action.help, f"{name} {action.dest}: no help"
            continue
        assert action.help, f"{name} {action.option_strings}: no help"
        assert any(opt in docs for opt in action.option_strings if opt.startswith("--")), \
            f"{name} {action.option_strings} is not in docs/cli.md"


def test_merge_is_in_readme_and_docs() -> None:
    assert "auditc merge" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "auditc merge TARGET" in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


# -- progress ------------------------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_progress_lines_have_honest_rate_and_eta() -> None:
    """100 requests, 4 commit batches of 25; the engine reports each engine batch of 5 after 1 s
    of work. A line per engine batch (interval 0): done moves by 5, rate = done / elapsed = 5 req/s,
    eta = left / rate. No burst rate of thousands of req/s when a commit batch lands."""
    clock = _Clock()
    out = io.StringIO()
    bar = ExecProgress(100, "smol stage 1", enabled="plain", console=Console(file=out, width=200), interval=0, clock=clock)
    with bar:
        for _ in range(4):
            bar.begin_batch(25)
            for _ in range(5):
                clock.t += 1.0
                bar.engine_work(5)
            for _ in range(25):  # the commit batch's results arrive at once
                bar.advance(1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[smol stage 1] 100 requests to run"
    assert "[smol stage 1] 5/100 requests (5.0%), 5.00 req/s, elapsed 0:00:01, eta 0:00:19" in lines
    assert "[smol stage 1] 50/100 requests (50.0%), 5.00 req/s, elapsed 0:00:10, eta 0:00:10" in lines
    rates = [float(m) for m in re.findall(r"([\d.]+) req/s", "\n".join(lines[1:]))]
    assert rates and max(rates) == pytest.approx(5.0)
    assert lines[-1] == "[smol stage 1] done: 100/100 requests in 0:00:20 (5.00 req/s)"


def test_auto_display_is_plain_without_a_terminal_and_silent_with_none() -> None:
    pipe = io.StringIO()
    with ExecProgress(3, "m stage 1", enabled="auto", console=Console(file=pipe), interval=3600) as bar:
        bar.begin_batch(3)
        bar.advance(3)
    assert pipe.getvalue().splitlines()[0] == "[m stage 1] 3 requests to run"
    assert "done: 3/3" in pipe.getvalue()
    quiet = io.StringIO()
    with ExecProgress(3, "m", enabled="none", console=Console(file=quiet)) as bar:
        bar.advance(3)
    assert quiet.getvalue() == ""


def test_run_display_plain_logs_a_line_per_model_stage(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AUDITLANG_PROGRESS_INTERVAL", "0")
    assert main(["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(tmp_path / "r"),
                 "--no-report", "--display", "plain"]) == 0
    err = capsys.readouterr().err
    for mid in ("smollm2", "gemma3"):
        assert re.search(rf"\[{mid} stage 1\] \d+ requests to run", err)
        assert re.search(rf"\[{mid} stage 1\] done: (\d+)/\1 requests in", err)
    assert "scoring, metrics and bootstrap intervals" in err


def test_hf_engine_reports_work_per_engine_batch() -> None:
    """The hf engine's _chunks calls progress_hook after each forward batch, weighting a
    request's rows 1/rows (here 3 requests x 2 rows, batch_size 2)."""
    pytest.importorskip("torch")
    from auditlang.engines.hf import HFEngine, _Row

    eng = HFEngine.__new__(HFEngine)
    eng.config = type("C", (), {"batch_size": 2})()
    eng._batch_cost, eng._vocab, eng._budget = 0, 1, 10**9
    got: list[float] = []
    eng.progress_hook = got.append
    rows = [_Row(i, [1] * (i + 1), [], sample=s) for i in range(3) for s in range(2)]
    batches = list(eng._chunks(rows, lambda r: 1))
    assert sum(len(b) for b in batches) == 6 and len(got) == len(batches)
    assert sum(got) == pytest.approx(3.0)


# -- plan truth ----------------------------------------------------------------------------

def test_plan_without_data_estimates_from_declared_sizes(tmp_path: Path, capsys) -> None:
    spec_text = QUICK.read_text(encoding="utf-8").replace('data_root = "data"', 'data_root = "nowhere"')
    spec = tmp_path / "q.audit"
    spec.write_text(spec_text, encoding="utf-8")
    out = tmp_path / "p.json"
    assert main(["plan", str(spec), "--format", "json", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    # declared: 60 + 100 items, 2 models, 2 variants: one answer generation (the token protocols'
    # first-token window rides on it, issue 16) and (verbal) a follow-up each
    assert plan["estimated"] and plan["stage1_request_count"] == 640
    assert plan["unique_request_count"] == 1280  # what the run with data executes (see test below)
    assert main(["plan", str(spec)]) == 0
    text = capsys.readouterr().out
    assert "estimated from declared sizes" in text and "~320" in text
    assert "not found" in text or "not available" in text or "estimates" in text


def test_plan_with_data_counts_quickstart_exactly(capsys, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    assert main(["plan", str(QUICK), "--format", "json", "--no-requests", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert not plan["estimated"] and plan["unique_request_count"] == 1280 and plan["stage1_request_count"] == 640
    assert plan["token_estimate_followups"]["prompt_tokens"] > 0


def test_plan_limit_and_data_root_override_note(capsys) -> None:
    assert main(["plan", str(QUICK), "--limit", "3", "--data-root", str(ROOT / "examples" / "data")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "overrides the spec's settings data_root 'data'" in out
    assert "stage 1 24 " in out  # 6 items x 2 variants x 2 models x 1 stage-1 request (token windows ride on it)


# -- settings ------------------------------------------------------------------------------

def test_swap_model_is_run_recorded_and_read_back(tmp_path: Path, capsys) -> None:
    run = tmp_path / "r"
    assert main(["run", str(QUICK), "--limit", "1", "--engine", "dryrun", "--out", str(run), "--display", "none",
                 "--swap-model", 'smollm2=embedded("gemma3-270m", dtype=float32, max_tokens=4)']) == 0
    info = json.loads((run / "run.json").read_text())
    assert info["model_swaps"] == {"smollm2": 'embedded("gemma3-270m", dtype=float32, max_tokens=4)'}
    plan = json.loads((run / "plan.json").read_text())
    assert plan["models"]["smollm2"]["path"] == "gemma3-270m"
    checklist = next((run / "report").rglob("checklist*.md")).read_text(encoding="utf-8")
    assert "model smollm2: swapped on the command line" in checklist
    assert main(["report", str(run)]) == 0  # read back with the swap: same plan hash
    assert main(["status", str(run)]) == 0
    capsys.readouterr()
    assert main(["run", str(QUICK), "--engine", "dryrun", "--out", str(tmp_path / "x"), "--swap-model", "smol=hf('x')"]) == 2
    assert "did you mean 'smollm2'" in capsys.readouterr().err
    assert main(["run", str(QUICK), "--engine", "dryrun", "--out", str(tmp_path / "x"), "--swap-model", "smollm2"]) == 2
    assert main(["plan", str(QUICK), "--swap-model", 'smollm2=embedded("gemma3-270m", dtyp=float32)']) == 1
    err = capsys.readouterr().err
    assert "--swap-model smollm2:1:" in err and "did you mean 'dtype'" in err


def _results(run: Path) -> int:
    return sqlite3.connect(run / "journal.sqlite").execute("SELECT COUNT(*) FROM results").fetchone()[0]


def test_response_cache_is_shared_across_run_directories(tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    args = ["--limit", "2", "--engine", "dryrun", "--no-report", "--display", "none", "--cache", str(cache)]
    assert main(["run", str(QUICK), "--out", str(tmp_path / "a"), *args]) == 0
    first = json.loads((tmp_path / "a" / "run.json").read_text())["last_run"]
    assert first["executed"] > 0 and first["from_cache"] == 0
    assert main(["run", str(QUICK), "--out", str(tmp_path / "b"), *args]) == 0
    second = json.loads((tmp_path / "b" / "run.json").read_text())["last_run"]
    assert second["executed"] == 0 and second["from_cache"] == first["executed"]
    assert _results(tmp_path / "b") == _results(tmp_path / "a")
    assert "from the response cache" in capsys.readouterr().err
    # the checklist says where b's results came from (issue 34: the journal count alone read as executed)
    assert main(["report", str(tmp_path / "b")]) == 0
    checklist = (tmp_path / "b" / "report" / "checklist.md").read_text(encoding="utf-8")
    n = second["from_cache"]
    assert (f"Last run: 0 requests executed, {second['cached']} already stored ({n} of them copied into "
            "journal.sqlite from the response cache") in checklist, checklist
    # without the cache a new run directory executes everything again
    assert main(["run", str(QUICK), "--out", str(tmp_path / "c"), *args[:-2]]) == 0
    assert json.loads((tmp_path / "c" / "run.json").read_text())["last_run"]["executed"] == first["executed"]


def test_unchanged_rerun_loads_no_model(tmp_path: Path, capsys) -> None:
    run = tmp_path / "r"
    args = ["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(run), "--no-report", "--display", "none"]
    assert main(args) == 0
    assert set(json.loads((run / "run.json").read_text())["static_keys"]) == {"smollm2", "gemma3"}
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().err
    assert "loading" not in out
    assert "[smollm2] unchanged and every request stored: not loaded" in out
    assert json.loads((run / "run.json").read_text())["last_run"]["cached"] > 0
    # more items: the model has missing work, so it is loaded
    assert main([*args[:3], "3", *args[4:]]) == 0
    assert "[smollm2] loading the dryrun engine" in capsys.readouterr().err


def test_openai_model_without_base_url_takes_openai_base_url(tmp_path: Path, monkeypatch, capsys) -> None:
    """A spec `openai(...)` model naming no base_url goes to $OPENAI_BASE_URL (here a port where
    nothing listens: exit 3 naming that URL); run.json records where the URL came from."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = tmp_path / "o.audit"
    spec.write_text(QUICK.read_text(encoding="utf-8").replace(
        'embedded("smollm2-135m-instruct", dtype=float32, batch_size=16, max_tokens=16)', 'openai("served-smol")'),
        encoding="utf-8")
    (tmp_path / "data").symlink_to(ROOT / "examples" / "data")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    run = tmp_path / "r"
    # the data lives outside this project: the user names it (a symlink alone is refused, docs/security.md)
    assert main(["run", str(spec), "--limit", "1", "--out", str(run), "--display", "none",
                 "--data-root", str(ROOT / "examples" / "data")]) == 3
    err = capsys.readouterr().err
    assert f"using $OPENAI_BASE_URL = http://127.0.0.1:{port}/v1" in err and f"127.0.0.1:{port}" in err.split("error:")[1]
    info = json.loads((run / "run.json").read_text())
    assert info["env_settings"] == {"smollm2": {"base_url": f"http://127.0.0.1:{port}/v1", "from": "OPENAI_BASE_URL"}}


def test_fmt_missing_file_is_e100_exit_1(tmp_path: Path, capsys) -> None:
    (tmp_path / "quick.audit").write_text("", encoding="utf-8")
    assert main(["fmt", str(tmp_path / "quik.audit")]) == 1
    err = capsys.readouterr().err
    assert "error[E100]: file not found" in err and "did you mean 'quick.audit'" in err


def test_plan_step_log_reports_slow_steps_only() -> None:
    from auditlang.cli.plan import StepLog

    out = io.StringIO()
    log = StepLog(threshold=0.05, stream=out)
    log("reading dataset fast")
    log("reading dataset slow")
    import time

    time.sleep(0.1)
    log(None)
    assert out.getvalue().startswith("plan: reading dataset slow (") and "fast" not in out.getvalue()


def test_embedded_conversion_is_announced(tmp_path: Path, monkeypatch, capsys) -> None:
    """The one-time GGUF conversion says what it is doing and how long it takes, on stderr
    (the conversion itself is replaced by a stub writing a complete checkpoint)."""
    from auditlang.engines import embedded

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    try:
        embedded.checkpoint_dir("smollm2-135m-instruct")
    except Exception as e:  # noqa: BLE001 - the embedded model's package is not installed
        pytest.skip(f"embedded model package not installed: {e}")

    def fake_convert(info, out: Path) -> None:
        (out / "config.json").write_text("{}", encoding="utf-8")
        (out / embedded.PROVENANCE_FILE).write_text(json.dumps({"recipe_version": embedded.RECIPE_VERSION}),
                                                    encoding="utf-8")

    monkeypatch.setattr(embedded, "_convert", fake_convert)
    embedded.resolve_embedded("smollm2-135m-instruct")
    err = capsys.readouterr().err
    assert "converting embedded model 'smollm2-135m-instruct' to a checkpoint, once" in err
    assert re.search(r"converted 'smollm2-135m-instruct' in \d+s", err)
    embedded.resolve_embedded("smollm2-135m-instruct")  # cached: silent
    assert capsys.readouterr().err == ""


def test_merge_prints_a_readable_summary(tmp_path: Path, capsys) -> None:
    for i in (0, 1):
        assert main(["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(tmp_path / f"s{i}"),
                     "--shard", f"{i}/2", "--display", "none"]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "all"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r".*all: merged 2 journal\(s\): \d+ results added, 0 errors replaced by successes, "
                        r"\d+ already present, 0 conflicts \(first result kept\)", out[0])
    assert out[1] == f"next: auditc report {tmp_path / 'all'}"
    assert main(["report", str(tmp_path / "all")]) == 0
