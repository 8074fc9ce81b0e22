"""`auditc run --display plain` tells one story on one stream (issue 35, item 7): the header, model
loads, stage lines, the whole-run `[run]` line (requests done / total across models and stages,
with an eta) and `done` all on stderr, nothing on stdout; counts move inside one long engine call
(the engine's progress hook); the libraries' own bars ("Loading weights") stay out of the log.

User path: `auditc run` on a spec with two models and a follow-up protocol, the models served by a
scripted engine whose one call per stage takes a while and yields its results only at the end.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripted_engine import number_items, use_scripted_engine  # noqa: E402

from auditlang.cli import main  # noqa: E402
from auditlang.core.engine import report_progress  # noqa: E402

SPEC = """import "stdlib/s000"

dataset nums = jsonl("n.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
model gem = embedded("gemma3-270m", max_tokens=8)
audit a {
  models = [smol, gem]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""


def _slow_engine(monkeypatch):
    cls = use_scripted_engine(monkeypatch, lambda req: None)
    base_run, base_init = cls.run, cls.__init__

    def __init__(self, config) -> None:
        base_init(self, config)
        from transformers.utils.logging import tqdm  # the wrapper transformers draws "Loading weights" with

        for _ in tqdm(range(3), desc="Loading weights"):
            pass

    def run(self, requests):
        reqs = list(requests)
        for _ in reqs:  # one long call: work reported as it finishes, results only at the end
            time.sleep(0.08)
            report_progress(self, 1.0)
        yield from base_run(self, reqs)

    cls.__init__, cls.run, cls.progress_hook = __init__, run, None
    return cls


def test_plain_run_is_one_story_on_stderr(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "n.jsonl").write_text(number_items(8), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUDITLANG_PROGRESS_INTERVAL", "0.2")
    _slow_engine(monkeypatch)
    capsys.readouterr()
    assert main(["run", "s.audit", "--data-root", ".", "--out", "runs/p", "--display", "plain", "--no-report"]) == 0
    out, err = capsys.readouterr()
    assert out == ""  # `> out 2> err` does not split the story
    assert "Loading weights" not in err and "\x1b[" not in err
    lines = err.splitlines()

    def first(prefix: str) -> int:
        return next(i for i, ln in enumerate(lines) if ln.startswith(prefix))

    story = [first("run runs/p: "), first("[smol] loading the hf engine"), first("[smol stage 1] 8 requests to run"),
             first("[smol stage 1] done"), first("[gem] loading the hf engine"), first("[gem stage 1] done"),
             first("requests: executed"), first("done: runs/p")]
    assert story == sorted(story), err
    # inside one engine call (results only at its end) the stage count rises with the engine's reports
    mid = [int(m.group(1)) for ln in lines if (m := re.match(r"\[smol stage 1\] (\d+)/8 requests", ln))]
    assert any(0 < c < 8 for c in mid), err
    # the whole run: one line after every stage line, over both models and their stages
    run_lines = [ln for ln in lines if ln.startswith("[run] ")]
    assert run_lines and all("over 2 model(s) and their stages" in ln for ln in run_lines)
    parsed = [tuple(int(x.replace(",", "")) for x in m.groups())
              for ln in run_lines if (m := re.match(r"\[run\] ([\d,]+)/([\d,]+) requests", ln))]
    executed = json.loads((tmp_path / "runs/p/run.json").read_text())["last_run"]["executed"]
    assert parsed[-1] == (executed, executed)  # at the end: every executed request, the exact total
    assert [d for d, _ in parsed] == sorted(d for d, _ in parsed)
    assert any(0 < d < t and "eta 0:" in ln for (d, t), ln in zip(parsed, run_lines))
    # before the second model starts, the total already counts its planned requests
    before_gem = [t for (d, t), ln in zip(parsed, run_lines) if lines.index(ln) < story[4]]
    assert before_gem and before_gem[0] >= 2 * 8


def test_rich_display_has_a_whole_run_bar() -> None:
    import io

    from rich.console import Console

    from auditlang.execute.progress import ExecProgress, RunProgress, stage_slot

    buf = io.StringIO()
    run = RunProgress({("m", "stage 1"): 4, ("m", "follow-ups"): 4, ("j", "follow-ups"): 2})
    console = Console(file=buf, force_terminal=True, width=160, color_system=None)
    with ExecProgress(4, "m stage 1", enabled="rich", console=console, whole=stage_slot(run, "m", "stage 1")) as bar:
        bar.begin_batch(4)
        bar.advance(2)
    assert run.total == 10 and run.done == 2  # the stage's exact 4, the plan's 4 + 2 follow-ups
    assert re.search(r"run \(all models and stages\) .* 2/10 .*while executing", buf.getvalue())
