"""On a host that renders figures in forked workers, `build_report` draws them when it starts and
lets them render while it builds the comparisons, tables, checklist and disclosure; the files are
byte for byte those of the serial build, and a rebuild reads them from the figure cache (no
drawing, no worker). User path: `auditc run` / `auditc report` on a machine with cores to spare."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from report_fixtures import build_run

pytest.importorskip("matplotlib")

SPEC = """
settings s { seed = 1, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=16, seed=3)
dataset mmlu = jsonl("mmlu.jsonl", task=multiple_choice, sample=16, seed=5)
model small = hf("org/small-1b", size=1.0, revision="r1", dtype=bf16)
model big = hf("org/big-7b", size=7.0, revision="r2", dtype=bf16)
template t_plain = template("Q: {{ question }} A:")
template t_other = template("Question: {{ question }} Answer:")
variant plain = variant(t_plain)
variant other = variant(t_other)
protocol tok_norm = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=20)
template conf = template("How confident are you? Reply with a number between 0.0 and 1.0.")
protocol verbal = verbalized(scale=decimal_01, phrasing=conf, provenance=self, mode=followup)
evaluator fc = first_char()
audit main {
  models = [small, big]
  datasets = [arc, mmlu]
  variants = [plain, other]
  protocols = [tok_norm, verbal]
  evaluators = [fc]
  bootstrap = bootstrap(resamples=50, seed=1)
}
compare gap = ece_gap(main, verbal=verbal, token=tok_norm)
compare sp = spread(main, variants=[plain, other])
compare sz = size_spread(main, variants=[plain, other])
"""


def _run(tmp: Path):
    tmp.mkdir()
    return build_run(tmp, SPEC)


def _files(report: Path) -> dict[str, bytes]:
    return {p.relative_to(report).as_posix(): p.read_bytes() for p in sorted(report.rglob("*"))
            if p.is_file() and ".figures-cache" not in p.parts}


@pytest.mark.skipif(sys.platform != "linux", reason="figures render in forked workers only on Linux")
def test_forced_workers_render_the_figures_while_the_report_is_built_and_write_the_serial_files(
        tmp_path: Path, monkeypatch) -> None:
    from auditlang import report
    from auditlang.core import workers
    from auditlang.report import figures

    workers._stop_tqdm_monitor()
    if threading.active_count() > 1:  # the report would (rightly) not fork beside them
        pytest.skip("threads left running by earlier tests in this process")
    spec, plan, serial_run = _run(tmp_path / "serial")
    monkeypatch.setenv(figures.FIGURE_WORKERS_ENV, "1")
    serial = _files(report.build_report(spec, plan, serial_run))
    assert sum(name.startswith("figures/") for name in serial) >= 6  # reliability per model, spread, size

    events: list[str] = []

    def spy(owner, name: str, label: str) -> None:
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, **k: events.append(label) or real(*a, **k))

    spy(figures, "start_figures", "figures drawn")
    spy(figures, "fork_map_async", "workers forked")
    spy(figures.Rendering, "result", "figures collected")
    spy(report, "compute_all", "comparisons")
    spy(report, "build_checklist", "checklist")
    spy(report, "disclosure_tables", "disclosure")
    spy(report, "render_html", "html")
    monkeypatch.setenv(figures.FIGURE_WORKERS_ENV, "3")
    spec, plan, forked_run = _run(tmp_path / "forked")
    out = report.build_report(spec, plan, forked_run)
    assert events == ["figures drawn", "workers forked", "comparisons", "checklist", "disclosure",
                      "figures collected", "html"]
    assert threading.active_count() == 1  # the pool's threads and workers are gone
    assert _files(out) == serial

    events.clear()  # unchanged inputs: read from the cache, nothing drawn or forked
    assert _files(report.build_report(spec, plan, forked_run)) == serial
    assert events == ["comparisons", "checklist", "disclosure", "html"]


def test_serial_hosts_draw_each_figure_after_the_comparisons_as_before(tmp_path: Path, monkeypatch) -> None:
    from auditlang import report
    from auditlang.report import figures

    events: list[str] = []
    real_all = figures.all_figures
    monkeypatch.setattr(figures, "all_figures", lambda *a: events.append("all_figures") or real_all(*a))
    monkeypatch.setattr(figures, "start_figures", lambda *a: pytest.fail("started asynchronously"))
    monkeypatch.setattr(figures, "fork_map_async", lambda *a: pytest.fail("forked"))
    real_checklist = report.build_checklist
    monkeypatch.setattr(report, "build_checklist", lambda *a: events.append("checklist") or real_checklist(*a))
    monkeypatch.setenv(figures.FIGURE_WORKERS_ENV, "1")
    spec, plan, run_dir = build_run(tmp_path, SPEC)
    out = report.build_report(spec, plan, run_dir)
    assert events == ["all_figures", "checklist"]
    assert (out / "figures" / "spread_sp.png").is_file()


@pytest.mark.skipif(sys.platform != "linux", reason="figures render in forked workers only on Linux")
def test_a_build_that_fails_while_the_figures_render_leaves_no_worker_or_thread(tmp_path: Path, monkeypatch) -> None:
    import multiprocessing

    from auditlang import report
    from auditlang.core import workers
    from auditlang.report import figures

    workers._stop_tqdm_monitor()
    if threading.active_count() > 1:
        pytest.skip("threads left running by earlier tests in this process")
    forked = []
    real = figures.fork_map_async
    monkeypatch.setattr(figures, "fork_map_async", lambda *a: forked.append(1) or real(*a))

    def broken(*a):
        raise RuntimeError("checklist failed")

    monkeypatch.setattr(report, "build_checklist", broken)
    monkeypatch.setenv(figures.FIGURE_WORKERS_ENV, "3")
    spec, plan, run_dir = _run(tmp_path / "r")
    with pytest.raises(RuntimeError, match="checklist failed"):
        report.build_report(spec, plan, run_dir)
    assert forked and threading.active_count() == 1 and not multiprocessing.active_children()
    assert not (run_dir / "report" / ".figures-cache").exists()  # nothing half-rendered is kept
