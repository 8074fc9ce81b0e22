"""The study-001 twin's A-D grid is not empty (issue 10 item 12; 001 §3.2 Table 2, §3.3).

The embedded models never write 001 §3.1's "Guess: ... / Probability: ..." format in one
generation, but continue a prefilled "Probability:" with a number (001 §3.3's elicitation). The
twin's grid therefore reads verbal confidence in the model's own answer through a prefilled
Probability: slot. The run test drives `auditc run` on the twin with a scripted model that
behaves that way: the paper's joint protocol parses nothing, the twin's grid has every setting.
The committed report (examples/reports/s001, made with the real embedded models) is checked too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from spec_helpers import REPO, TWINS

from auditlang.cli import main
from auditlang.core.requests import Result, Sample, TokenLogprob

TWIN = TWINS["s001"]
REPORT = REPO / "examples" / "reports" / "s001"
GAPS = ["g_A", "g_B", "g_C", "g_D"]
ANSWERS = ["Paris", "the sun", "1945", "oxygen"]


def _u(text: str, salt: str) -> float:
    return int(hashlib.sha256((salt + text).encode()).hexdigest()[:8], 16) / 2**32


def _text(req) -> str:
    p = req.prompt
    return p.text if p.text is not None else "\n".join(m.content for m in p.messages or ())


class TinyModel:
    """Answers every free generation with a short answer line (no Probability: line, as the
    embedded models do on the verbalized prompt) and continues a prefilled "Probability:" with a
    number; teacher-forced tokens get prompt-dependent logprobs."""

    def __init__(self, config) -> None:
        self.config = config

    def capabilities(self):
        return frozenset({"generate", "choice_logprobs", "continuation_logprobs"})

    def fingerprint(self):
        return {"engine": "scripted", "model": self.config.name}

    def run(self, requests):
        for r in requests:
            text = _text(r)
            if r.kind == "generate":
                out = (f" {0.3 + 0.6 * _u(text, 'p'):.2f}" if text.rstrip().endswith("Probability:")
                       else ANSWERS[int(_u(text, "a") * len(ANSWERS))])
                yield Result(request_id=r.id, kind=r.kind, samples=[Sample(text=out, tokens=[])])
            elif r.kind == "continuation_logprobs":
                toks = r.p["continuation"].split() or [r.p["continuation"]]
                yield Result(request_id=r.id, kind=r.kind, continuation=[
                    TokenLogprob(t, i, -3.0 * _u(text + t, str(i)), {}) for i, t in enumerate(toks)])
            else:
                lps = {c: -1.0 for c in r.p["choices"]}
                yield Result(request_id=r.id, kind=r.kind, choice_logprobs=lps, top_logprobs={})

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory, shared_data: Path) -> Path:
    import auditlang.execute.runner as runner
    from auditlang.engines import embedded

    tmp = tmp_path_factory.mktemp("s001_twin")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
        mp.setattr(runner, "_load", TinyModel)
        # a model cache of its own with a stand-in checkpoint per embedded model (static keys
        # exist whether or not this machine ever converted the real models)
        mp.setenv("AUDITLANG_CACHE", str(tmp / "model-cache"))
        for name in ("smollm2-135m-instruct", "gemma3-270m"):
            try:
                d = embedded.checkpoint_dir(name)
            except Exception as e:  # noqa: BLE001 - the model's package is not installed
                pytest.skip(f"embedded model package not installed: {e}")
            d.mkdir(parents=True)
            (d / "model.safetensors").write_bytes(name.encode())
        # the twin as committed but for its per-cell bootstrap (B=1000 -> 50): the bin-free ECE
        # of every cell has no batch form and would take minutes on the 2-core machine
        text = TWIN.read_text(encoding="utf-8")
        assert text.count("resamples=1000") == 1
        spec = tmp / TWIN.name
        spec.write_text(text.replace("resamples=1000", "resamples=50"), encoding="utf-8")
        out = tmp / "run"
        rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--limit", "3",
                   "--no-progress"])
        assert rc == 0
    return out


SHIFTS = {"g_A - g_B", "g_A - g_C", "interaction"}


def _gaps_only(t: pd.DataFrame) -> pd.DataFrame:
    """The four A-D gaps: not the shifts, nor the twin's readout= row (001 Table 2's token readout:
    the T2 configuration's gap and the T1 - T2 difference, named "<a> - <b>")."""
    q = t.quantity
    return t[~q.isin(SHIFTS) & ~q.str.contains(" - ", regex=False) & ~q.str.startswith("s001.tok_bare_t2|")]


def _grid_is_full(comparisons: Path) -> pd.DataFrame:
    """Every listed setting has the four gaps g_A..g_D, each with a paired interval; the macro
    means of the four gaps have macro-bootstrap intervals. Returns the grid table."""
    grid = pd.read_csv(comparisons / "grid.csv")
    n_settings = len(grid)
    assert n_settings > 0, "the A-D grid is empty"
    assert grid[GAPS].notna().all().all()
    assert (grid["n_verbal_parsed"] > 0).all()
    per = pd.read_csv(comparisons / "grid_setting_ci.csv")
    per = _gaps_only(per)  # the four gaps, named "<token config>|<estimator>"
    assert len(per) == 4 * n_settings
    assert per[["value", "value lo", "value hi"]].notna().all().all()
    assert (per["value lo"] <= per["value"] + 1e-12).all() and (per["value"] <= per["value hi"] + 1e-12).all()
    macro = pd.read_csv(comparisons / "grid_macro_ci.csv")
    macro = _gaps_only(macro)
    groups = grid.group.nunique() if "group" in grid else 1  # group_by=[instruct]: Instruct and base
    assert len(macro) == 4 * grid.evaluator.nunique() * groups
    assert "group" not in grid or set(macro.group) == set(grid.group)
    assert macro[["macro mean", "macro lo", "macro hi"]].notna().all().all()
    assert (macro["macro lo"] <= macro["macro hi"]).all()
    return grid


def test_twin_grid_is_filled_when_models_only_continue_a_prefilled_probability(twin_run: Path) -> None:
    report = twin_run / "report"
    # 2 models x 4 datasets x 2 evaluators, each with g_A..g_D and intervals (001 §3.2)
    assert len(_grid_is_full(report / "comparisons")) == 16
    cells = pd.read_csv(report / "cells.csv")
    vpr = cells.groupby("protocol")["vpr"].mean()
    # the paper's joint protocol (§3.1) parses nothing from such a model: the grid must not use it
    assert vpr["s001.verbal_self"] == 0.0
    assert vpr["verbal_self_prefilled"] == 1.0
    # the checklist says how the twin elicits (prefilled answer, value only), not "a follow-up turn"
    checklist = (report / "checklist.md").read_text(encoding="utf-8")
    assert ("the prompt s001.verbalized_prompt answered by the prefill s001.supplied_prefill, which holds the "
            "answer; the model writes only the value") in checklist  # the layout the program declares (issue 34)
    assert "the confidence refers to the model's extracted answer (answer_form=extracted)" in checklist
    # the disclosure names everything that separates it from the paper's joint protocol
    disclosure = (report / "disclosure.md").read_text(encoding="utf-8")
    assert ("| mode=followup, prefill=s001.supplied_prefill, answer_form=extracted, max_tokens=16 "
            "(verbal_self_prefilled) | mode=joint, prefill=none, answer_form=full, max_tokens=48 (s001.verbal_self) |"
            ) in disclosure


def test_committed_twin_report_has_a_full_grid() -> None:
    # examples/reports/s001 comes from the real embedded models (COMMAND.md, --limit 3): settings
    # where no row parsed are listed as not computable, the others carry all four gaps with 95%
    # intervals; both models and most (model, dataset) settings are in the grid
    grid = _grid_is_full(REPORT / "comparisons")
    assert set(grid.model) == {"smollm2", "gemma3"}
    assert len(grid.groupby(["model", "dataset"])) >= 6
    cells = pd.read_csv(REPORT / "cells.csv")
    vpr = cells[cells.audit == "main"].groupby("protocol")["vpr"].mean()
    assert vpr["verbal_self_prefilled"] > 0.25
    # the paper's own joint protocol is reported next to it, with the parse rate it gets here
    assert "s001.verbal_self" in set(cells[cells.audit == "supplied"].protocol)
