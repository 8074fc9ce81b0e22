"""`hub(ID, SPLIT)` datasets through `auditc plan` / `auditc run`, offline from a prepared cache:
the same filters, sampling and field mapping as a file, dotted paths into nested columns,
`revision=` with the commit and content hash recorded, and the real cause when loading fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub_specs import HEAD, plan_json, tail

from auditlang.cli import main

REPO = Path(__file__).resolve().parents[2]

TAIL = tail()
MAPPING = 'task=multiple_choice, choices="choices.text", labels="choices.label", gold="answerKey", sample=20, seed=7'


def _spec(tmp_path: Path, dataset: str, name: str = "spec.audit") -> Path:
    p = tmp_path / name
    p.write_text(HEAD + dataset + "\n" + TAIL, encoding="utf-8")
    return p


_plan = plan_json


def _hub(extra: str = "") -> str:
    return f'dataset arc = hub("allenai/ai2_arc", "test", config="ARC-Challenge", {MAPPING}{extra})'


def test_hub_plan_equals_the_same_rows_from_a_file(offline_hub, tmp_path, capsys):
    """One code path after loading: the nested JSONL copy of the rows gives the same sample,
    the same items and the same request bodies as the Hub split."""
    data = tmp_path / "arc_nested.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in offline_hub["rows"]), encoding="utf-8")
    hub = _plan(capsys, _spec(tmp_path, _hub()))
    file = _plan(capsys, _spec(tmp_path, f'dataset arc = jsonl("arc_nested.jsonl", {MAPPING})', "file.audit"),
                 "--data-root", str(tmp_path))
    dh, df = hub["datasets"]["arc"], file["datasets"]["arc"]
    assert dh["available"] and dh["n_items"] == df["n_items"] == 60
    assert dh["indices"] == df["indices"] and len(dh["indices"]) == 20
    assert hub["requests"] == file["requests"] and len(hub["requests"]) > 0
    def strip(cells):  # a cell's hash covers its dataset declaration, which differs (hub vs jsonl)
        return [{k: v for k, v in c.items() if k != "hash"} for c in cells]

    assert strip(hub["cells"]) == strip(file["cells"])
    assert not hub["estimated"]


def test_nested_fields_match_the_flat_public_copy(offline_hub, tmp_path, capsys, shared_data):
    """choices="choices.text" + labels="choices.label" + gold="answerKey" reproduce the flat
    copy's items (gold text and index resolved from the label), so prompts are identical."""
    rows = [json.loads(x) for x in (shared_data / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:60]]
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(json.dumps({k: r[k] for k in ("id", "question", "choices", "answer", "answer_index")}) + "\n"
                            for r in rows), encoding="utf-8")
    hub = _plan(capsys, _spec(tmp_path, _hub()))
    file = _plan(capsys, _spec(tmp_path, 'dataset arc = jsonl("flat.jsonl", task=multiple_choice, sample=20, seed=7)',
                               "flat.audit"), "--data-root", str(tmp_path))
    assert hub["requests"] == file["requests"]


def test_filters_apply_to_hub_rows_like_to_files(offline_hub, tmp_path, capsys):
    keep = sum(1 for r in offline_hub["rows"] if r["answerKey"] in ("A", "B"))
    assert 0 < keep < 60
    plan = _plan(capsys, _spec(tmp_path, _hub(', filter_field="answerKey", filter_in=["A", "B"]').replace("sample=20", "sample=5")))
    assert plan["datasets"]["arc"]["n_items"] == keep
    capsys.readouterr()
    rc = main(["plan", str(_spec(tmp_path, _hub(', filter_field="answerKey", filter_in=["Z"]')))])
    err = capsys.readouterr().err
    assert rc == 1 and "E170" in err and "no row has answerKey in ['Z']" in err and "values present include: A, B, C, D" in err


def test_dotted_filter_field_in_a_file(tmp_path, capsys):
    """Dotted paths work for every source (one code path): filter on a nested column of a JSONL file."""
    rows = [{"id": str(i), "question": f"q{i}", "choices": ["x", "y"], "answer_index": 0, "meta": {"src": "ab"[i % 2]}}
            for i in range(10)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = _spec(tmp_path, 'dataset arc = jsonl("d.jsonl", task=multiple_choice, filter_field="meta.src", filter_in=["b"])')
    plan = _plan(capsys, spec, "--data-root", str(tmp_path))
    assert plan["datasets"]["arc"]["n_items"] == 5


def test_revision_and_content_hash_recorded(offline_hub, tmp_path, capsys):
    commit = offline_hub["commit"]
    plan = _plan(capsys, _spec(tmp_path, _hub(f', revision="{commit[:12]}"')))
    d = plan["datasets"]["arc"]
    assert d["revision"] == commit[:12] and d["commit"] == commit and d["offline"] is True
    assert d["hub_id"] == "allenai/ai2_arc" and d["config"] == "ARC-Challenge" and d["split"] == "test"
    from auditlang.data.hub import content_sha256

    assert d["content_sha256"] == content_sha256(offline_hub["rows"])
    assert isinstance(d["fingerprint"], str) and len(d["fingerprint"]) >= 16
    unpinned = _plan(capsys, _spec(tmp_path, _hub()))["datasets"]["arc"]
    assert unpinned["revision"] is None and unpinned["commit"] == commit
    assert unpinned["content_sha256"] == d["content_sha256"]


def test_a_pinned_revision_the_cache_does_not_hold_is_an_error_with_its_cause(offline_hub, tmp_path, capsys):
    spec = _spec(tmp_path, _hub(', revision="0000000deadbeef"'))
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "cannot run: dataset(s) arc are not available" in err
    assert "pins revision '0000000deadbeef'" in err and offline_hub["commit"] in err
    assert "hint: load the pinned revision once" in err
    assert not (tmp_path / "run" / "results").exists()


def test_run_names_the_real_cause_of_a_missing_split(offline_hub, tmp_path, capsys):
    spec = _spec(tmp_path, _hub().replace('config="ARC-Challenge"', 'config="ARC-Easy"'))
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "cannot load hub dataset 'allenai/ai2_arc' (config 'ARC-Easy'), split 'test'" in err
    assert "Couldn't find cache for allenai/ai2_arc for config 'ARC-Easy'" in err  # datasets' own words
    assert "Available configs in the cache: ['ARC-Challenge']" in err
    assert "hint: offline (HF_DATASETS_OFFLINE/HF_HUB_OFFLINE)" in err and "--data-root" not in err


def test_missing_datasets_package_names_the_extra(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # the local cache only: no Hub permission needed (docs/security.md)
    spec = _spec(tmp_path, _hub())
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 1 and "the `datasets` package is not installed" in err and "pip install 'auditlang[hub]'" in err


def test_installed_auditc_plan_offline_subprocess(hub_cache, tmp_path):
    """The command a user types, in a fresh process with HF_HOME and HF_DATASETS_OFFLINE=1."""
    spec = _spec(tmp_path, _hub())
    env = dict(os.environ, HF_HOME=str(hub_cache["home"]), HF_DATASETS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(REPO), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]))
    env.pop("HF_DATASETS_CACHE", None)
    out = subprocess.run([sys.executable, "-m", "auditlang.cli", "plan", str(spec), "--format", "json", "--no-requests"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)["datasets"]["arc"]
    assert d["available"] and d["n_items"] == 60 and d["commit"] == hub_cache["commit"]


@pytest.mark.slow
def test_run_checklist_records_hub_identity_and_unspecified_revision(offline_hub, tmp_path, capsys):
    """A real run (embedded model, 2 items): the checklist names the Hub id, split, commit and
    content hash, and flags the unpinned revision."""
    spec = _spec(tmp_path, _hub())
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--out", str(out), "--limit", "2", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    text = next((out / "report").glob("checklist*.md")).read_text(encoding="utf-8")
    assert "Hugging Face Hub 'allenai/ai2_arc', config 'ARC-Challenge', split 'test', revision not pinned" in text
    assert f"commit {offline_hub['commit']}" in text and "content sha256 " in text
    assert "UNSPECIFIED: dataset 'arc' does not pin revision= of Hub dataset 'allenai/ai2_arc'" in text


def test_unreachable_hub_reads_the_cache_without_retrying(hub_cache, tmp_path, capsys, monkeypatch):
    """No offline flag set and the Hub host allowed, but the Hub endpoint cannot be reached: the
    split comes from the cache at once (the libraries would retry for about a minute), and the
    flags are restored. (Without --allow-host the endpoint is not even probed: docs/security.md.)"""
    import datasets
    import huggingface_hub.constants as hc

    from auditlang.data import hub

    for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", hub_cache["cache"])
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    probes = []
    monkeypatch.setattr(hub, "_reachable", lambda endpoint: probes.append(endpoint) or False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    d = _plan(capsys, _spec(tmp_path, _hub()))["datasets"]["arc"]
    assert d["available"] and d["offline"] is True and probes == []  # not allowed: read offline, never probed
    d = _plan(capsys, _spec(tmp_path, _hub()), "--allow-host", "huggingface.co")["datasets"]["arc"]
    assert d["available"] and d["offline"] is True and d["commit"] == hub_cache["commit"]
    assert probes == [hc.ENDPOINT]
    assert datasets.config.HF_HUB_OFFLINE is False and hc.HF_HUB_OFFLINE is False
