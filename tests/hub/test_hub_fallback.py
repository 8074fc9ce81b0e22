"""`hub(ID, SPLIT, ..., fallback=jsonl(PATH, ...))` through `auditc check` / `plan` / `run` / `report`:
the fallback file is read only when the Hub split is not available offline (offline with no
cache, the Hub host not allowed), with its own field mapping and the hub's sampling; which source
was read is in the plan (hash included), the notes, run.json, the checklist and the methods text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hub_specs import HEAD, plan_json, tail

from auditlang.cli import main

TAIL = tail("checklist, disclosure")
HUB = ('dataset arc = hub("allenai/ai2_arc", "test", config="ARC-Challenge", task=multiple_choice, '
       'choices="choices.text", labels="choices.label", gold="answerKey", sample=20, seed=7{extra},\n'
       '                  fallback=jsonl("arc_flat.jsonl"{fb}))')


def _spec(tmp_path: Path, rows: list[dict], extra: str = "", fb: str = "", name: str = "spec.audit") -> Path:
    """A spec whose hub dataset falls back to a flat copy of the same rows (the local schema:
    choices a list, answer the gold text, answer_index), written next to it (the data root)."""
    flat = tmp_path / "arc_flat.jsonl"
    if not flat.exists():
        flat.write_text("".join(json.dumps({"id": r["id"], "question": r["question"], "choices": r["choices"]["text"],
                                            "answer_index": r["choices"]["label"].index(r["answerKey"]),
                                            "answer": r["choices"]["text"][r["choices"]["label"].index(r["answerKey"])]})
                                + "\n" for r in rows), encoding="utf-8")
    p = tmp_path / name
    p.write_text(HEAD + HUB.format(extra=extra, fb=fb) + "\n" + TAIL, encoding="utf-8")
    return p


@pytest.fixture
def no_hub_cache(hub_cache, tmp_path_factory, monkeypatch) -> dict:
    """Offline, with an empty Hugging Face cache: the Hub split is not available."""
    import datasets

    home = tmp_path_factory.mktemp("empty_hf")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return hub_cache


_plan = plan_json


def test_offline_without_cache_plans_from_the_fallback(no_hub_cache, tmp_path, capsys):
    spec = _spec(tmp_path, no_hub_cache["rows"])
    plan = _plan(capsys, spec)
    d = plan["datasets"]["arc"]
    from auditlang.core.hashing import sha256_file

    assert d["available"] and not plan["estimated"]
    assert d["source"] == "fallback" and d["fallback_file"] == "arc_flat.jsonl"
    assert d["sha256"] == sha256_file(tmp_path / "arc_flat.jsonl")
    assert d["hub_id"] == "allenai/ai2_arc" and d["config"] == "ARC-Challenge" and d["split"] == "test"
    assert "HF_DATASETS_OFFLINE" in d["hub_unavailable"] and "not in the local datasets cache" in d["hub_unavailable"]
    assert d["n_items"] == 60 and len(d["indices"]) == 20
    note = next(n for n in plan["notes"] if n.startswith("dataset 'arc':"))
    assert "read from its fallback file arc_flat.jsonl (sha256 " in note and "is not available offline" in note
    # the rich output says so too
    capsys.readouterr()
    assert main(["plan", str(spec)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: dataset 'arc': read from its fallback file arc_flat.jsonl" in out
    assert "fallback of hub allenai/ai2_arc" in out


def test_prepared_cache_reads_the_hub_and_the_plan_hashes_differ(no_hub_cache, tmp_path, capsys, monkeypatch):
    """The same 60 rows from the Hub cache (nested schema) and from the fallback file (flat
    schema, its own mapping) give the same sample and requests, but not the same plan."""
    spec = _spec(tmp_path, no_hub_cache["rows"])
    fallback = _plan(capsys, spec)
    import datasets

    monkeypatch.setenv("HF_HOME", str(no_hub_cache["home"]))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", no_hub_cache["cache"])
    hub = _plan(capsys, spec)
    dh, df = hub["datasets"]["arc"], fallback["datasets"]["arc"]
    assert dh["source"] == "hub" and dh["commit"] == no_hub_cache["commit"] and "fallback_file" not in dh
    assert any("read from the Hub" in n and "its fallback file arc_flat.jsonl was not needed" in n for n in hub["notes"])
    assert dh["indices"] == df["indices"] and hub["requests"] == fallback["requests"]
    assert hub["hash"] != fallback["hash"]
    assert [c["hash"] for c in hub["cells"]] != [c["hash"] for c in fallback["cells"]]
    assert _plan(capsys, spec)["hash"] == hub["hash"]  # deterministic given the source
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nothing"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "nothing" / "datasets")
    assert _plan(capsys, spec)["hash"] == fallback["hash"]


def test_dryrun_run_from_the_fallback_records_it_and_reads_back(no_hub_cache, tmp_path, capsys):
    spec = _spec(tmp_path, no_hub_cache["rows"])
    out = tmp_path / "run"
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(out), "--engine", "dryrun", "--display", "none"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "note: dataset 'arc': read from its fallback file arc_flat.jsonl" in err
    info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    meta = info["data"]["arc"]["meta"]
    assert meta["source"] == "fallback" and meta["sha256"] == info["data"]["arc"]["sha256"]
    assert (out / info["data"]["arc"]["file"]).read_bytes() == (tmp_path / "arc_flat.jsonl").read_bytes()
    text = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert ("dataset arc: Hugging Face Hub 'allenai/ai2_arc', config 'ARC-Challenge', split 'test', revision not "
            "pinned; NOT READ: not available offline") in text
    assert f"the fallback file arc_flat.jsonl (sha256 {meta['sha256']}) was read instead" in text
    assert "WARNING: dataset 'arc' was read from its fallback file arc_flat.jsonl" in text
    assert "dataset arc: fallback file arc_flat.jsonl" in text
    assert "Data sources: arc was read from the local file arc_flat.jsonl" in text  # the methods paragraph
    disclosure = (out / "report" / "disclosure.md").read_text(encoding="utf-8")
    assert "Data: arc was read from the local file arc_flat.jsonl (sha256 " in disclosure
    assert "in place of the Hugging Face Hub dataset allenai/ai2_arc (ARC-Challenge), split test, which was not " \
           "available offline" in disclosure
    # the run directory reads back on its own (stored copy, its own mapping): same plan hash
    (tmp_path / "arc_flat.jsonl").unlink()
    assert main(["report", str(out)]) == 0, capsys.readouterr().err


def test_dryrun_run_from_the_hub_cache(offline_hub, tmp_path, capsys):
    spec = _spec(tmp_path, offline_hub["rows"], extra=f', revision="{offline_hub["commit"]}"')
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(spec), "--out", str(out), "--engine", "dryrun", "--display", "none"]) == 0
    info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert info["data"]["arc"]["meta"]["source"] == "hub"
    text = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert f"commit {offline_hub['commit']}" in text and "its fallback file was not read" in text
    assert "NOT READ" not in text and "UNSPECIFIED: dataset 'arc' does not pin" not in text
    disclosure = (out / "report" / "disclosure.md").read_text(encoding="utf-8")
    assert f"Data: arc is the Hugging Face Hub dataset allenai/ai2_arc (ARC-Challenge), split test at revision " \
           f"{offline_hub['commit'][:12]}" in disclosure
    assert main(["report", str(out)]) == 0, capsys.readouterr().err


def test_a_hub_host_not_allowed_reads_the_cache_or_the_fallback(hub_cache, tmp_path, capsys, monkeypatch):
    """No offline flag, the Hub host not allowed: with a fallback this is no E180; nothing is
    downloaded (not even probed), the cache is read, else the fallback, and the note says why."""
    import datasets
    import huggingface_hub.constants as hc

    from auditlang.data import hub

    for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty" / "datasets")
    monkeypatch.setattr(hub, "_reachable", lambda endpoint: pytest.fail("the Hub was probed"))
    spec = _spec(tmp_path, hub_cache["rows"])
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(spec), "--out", str(out), "--engine", "dryrun", "--display", "none"]) == 0
    err = capsys.readouterr().err
    assert "downloads from hub.invalid are not allowed without --allow-host hub.invalid" in err
    info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert info["data"]["arc"]["meta"]["source"] == "fallback"
    assert not [a for a in info["access"] if a.get("kind") == "dataset"]  # nothing was downloaded
    capsys.readouterr()
    assert main(["plan", str(spec)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "dataset arc: https://hub.invalid/datasets/allenai/ai2_arc" in text
    assert "not allowed: auditc run reads the local cache, else the fallback file (--allow-host hub.invalid" in text
    # with the split in the cache, that is read (offline) instead of the fallback
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", hub_cache["cache"])
    d = _plan(capsys, spec)["datasets"]["arc"]
    assert d["source"] == "hub" and d["offline"] is True and d["commit"] == hub_cache["commit"]
    assert datasets.config.HF_HUB_OFFLINE is False and hc.HF_HUB_OFFLINE is False


def test_a_failure_with_network_access_is_not_covered_by_the_fallback(hub_cache, tmp_path, capsys, monkeypatch):
    """Online, a wrong id/config/split is the spec's mistake: the fallback is not read silently."""
    import datasets

    from auditlang.data import hub

    for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "_reachable", lambda endpoint: True)

    def missing(*a, **k):
        raise FileNotFoundError("Dataset 'allenai/ai2_arcc' doesn't exist on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", missing)
    spec = _spec(tmp_path, hub_cache["rows"])
    plan = _plan(capsys, spec, "--allow-host", "huggingface.co")
    assert not plan["datasets"]["arc"]["available"] and plan["estimated"]
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(tmp_path / "run"), "--engine", "dryrun", "--display", "none",
               "--allow-host", "huggingface.co"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "doesn't exist on the Hub" in err
    assert "the fallback file 'arc_flat.jsonl' is read only when the split is not available offline" in err


def test_missing_fallback_file_names_both_causes(no_hub_cache, tmp_path, capsys):
    spec = _spec(tmp_path, no_hub_cache["rows"])
    (tmp_path / "arc_flat.jsonl").unlink()
    capsys.readouterr()
    rc = main(["run", str(spec), "--out", str(tmp_path / "run"), "--engine", "dryrun", "--display", "none"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "is not available (offline (HF_DATASETS_OFFLINE/HF_HUB_OFFLINE)" in err
    assert "its fallback file 'arc_flat.jsonl' is not found under the data root" in err
    assert "hint: pass --data-root DIR" in err


def test_fallback_with_the_hub_mapping_is_a_data_error_at_the_fallback(no_hub_cache, tmp_path, capsys):
    """The local schema needs its own mapping: the hub's nested paths on the flat file fail at
    the fallback's line:col, with the file and line of the first bad row."""
    spec = _spec(tmp_path, no_hub_cache["rows"], fb=', choices="choices.text"')
    capsys.readouterr()
    rc = main(["plan", str(spec)])
    err = capsys.readouterr().err
    assert rc == 1 and "error[E170]" in err and "Traceback" not in err
    assert f"{spec}:4:28: error[E170]" in err  # the fallback's jsonl(...) call
    assert "arc_flat.jsonl:1: row has no field 'choices.text'" in err and "(60 rows have problems" in err


def test_bad_fallback_declarations_are_diagnostics(tmp_path, capsys):
    spec = tmp_path / "bad.audit"
    spec.write_text(
        'dataset a = hub("x/y", "test", task=open_qa, fallback="y.jsonl")\n'
        'dataset b = hub("x/y", "test", task=open_qa, fallback=jsonl("y.jsonl", task=open_qa))\n'
        'dataset c = hub("x/y", "test", task=open_qa, fallback=hub("x/z", "test"))\n'
        'dataset d = jsonl("d.jsonl", task=open_qa, fallback=jsonl("y.jsonl"))\n'
        'dataset e = hub("x/y", "test", task=open_qa, fallback=jsonl("y.jsonl", questoin="q"))\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{spec}:1:55: error[E124]: fallback= takes a local file written inline, jsonl(PATH, ...) or csv(PATH, ...); got a value" in err
    assert f"{spec}:2:72: error[E124]: 'task' of a fallback comes from its hub dataset" in err
    assert "hint: set task= on hub(...): both sources hold the same task" in err
    assert f"{spec}:3:55: error[E124]" in err and "got hub(...)" in err
    assert f"{spec}:4:44: error[E120]: unknown parameter 'fallback' for jsonl()" in err
    assert f"{spec}:5:72: error[E120]: unknown parameter 'questoin' for jsonl()" in err and "did you mean 'question'" in err


def test_a_derived_hub_dataset_samples_its_fallback_alike(no_hub_cache, tmp_path, capsys):
    """`arc5 = arc with (sample=5)`: the fallback is rebuilt with the derived sampling."""
    spec = _spec(tmp_path, no_hub_cache["rows"])
    spec.write_text(spec.read_text(encoding="utf-8").replace("datasets = [arc]", "datasets = [arc5]")
                    + "dataset arc5 = arc with (sample=5, seed=3)\n", encoding="utf-8")
    d = _plan(capsys, spec)["datasets"]["arc5"]
    assert d["source"] == "fallback" and len(d["indices"]) == 5
    import random

    assert d["indices"] == random.Random(3).sample(range(60), 5)


def test_sampling_and_dev_split_are_inherited_unless_the_fallback_sets_its_own(no_hub_cache, tmp_path, capsys):
    """sample/seed and dev/dev_sample (a pair) come from the hub dataset unless the fallback gives
    its own (a local copy may be a subset, or lack the split the Hub's dev items come from)."""
    spec = _spec(tmp_path, no_hub_cache["rows"], extra=", dev_sample=10")
    assert _plan(capsys, spec)["datasets"]["arc"]["n_dev"] == 10
    spec = _spec(tmp_path, no_hub_cache["rows"], extra=", dev_sample=10", fb=", dev_sample=5", name="own.audit")
    d = _plan(capsys, spec)["datasets"]["arc"]
    assert d["source"] == "fallback" and d["n_dev"] == 5
    spec = _spec(tmp_path, no_hub_cache["rows"], fb=", sample=8, seed=1", name="sample.audit")
    capsys.readouterr()
    out = tmp_path / "run"
    assert main(["run", str(spec), "--out", str(out), "--engine", "dryrun", "--display", "none"]) == 0
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    import random

    assert plan["datasets"]["arc"]["indices"] == random.Random(1).sample(range(60), 8)
    assert plan["datasets"]["arc"]["seed"] == 1
    text = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert "dataset arc: fallback file arc_flat.jsonl" in text and "sample 8 drawn with random.Random(1).sample" in text


def test_a_hub_dev_split_used_only_by_fallback_datasets_needs_no_permission(hub_cache, tmp_path, capsys, monkeypatch):
    """`dev=` a Hub train split (no local copy) on a Hub dataset whose fallback carves its own dev
    items: with the Hub host not allowed, neither is downloaded and the fallback's dev is used."""
    import datasets

    for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty" / "datasets")
    spec = _spec(tmp_path, hub_cache["rows"], extra=", dev=arc_train", fb=", dev_sample=10")
    spec.write_text(spec.read_text(encoding="utf-8") + 'dataset arc_train = hub("allenai/ai2_arc", "train", '
                    'config="ARC-Challenge", task=multiple_choice, choices="choices.text", labels="choices.label", '
                    'gold="answerKey", sample=30, seed=43)\n', encoding="utf-8")
    from auditlang.execute.access import load_allowances, offline_hubs, run_access
    from auditlang.resolve import compile_spec

    s = compile_spec(spec)
    assert set(offline_hubs(s, run_access(s), load_allowances([], []))) == {"arc", "arc_train"}
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", str(spec), "--out", str(out), "--engine", "dryrun", "--display", "none"]) == 0, \
        capsys.readouterr().err
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["datasets"]["arc"]["source"] == "fallback" and plan["datasets"]["arc"]["n_dev"] == 10
    # the same spec with the host allowed would download both: listed for permission, not offline
    assert offline_hubs(s, run_access(s), load_allowances(["hub.invalid"], [])) == {}


def test_show_and_the_python_api_read_the_same_source(no_hub_cache, tmp_path, capsys):
    """`auditc show` prints the prompts of the source `auditc run` reads; `auditlang.run` too."""
    import auditlang

    spec = _spec(tmp_path, no_hub_cache["rows"])
    capsys.readouterr()
    assert main(["show", str(spec), "*", "--item", "0"]) == 0
    out = capsys.readouterr()
    assert "note: dataset 'arc': read from its fallback file arc_flat.jsonl" in out.err
    run = auditlang.run(str(spec), out=tmp_path / "api_run", engine="dryrun")
    assert run.plan.datasets["arc"]["source"] == "fallback"
    assert run.plan.hash == json.loads((tmp_path / "api_run" / "plan.json").read_text(encoding="utf-8"))["hash"]


def _fresh_plan(spec: Path, env: dict, *extra: str) -> tuple[dict, bool]:
    """`auditc plan SPEC --format json` in a fresh process: (the plan, whether `datasets` was imported)."""
    import os
    import subprocess
    import sys

    code = ("import json, sys\nfrom auditlang.cli import main\nrc = main(sys.argv[1:])\n"
            "print(json.dumps({'rc': rc, 'datasets': 'datasets' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code, "plan", str(spec), "--format", "json", *extra],
                         env={**os.environ, **env}, check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    *body, last = out.stdout.strip().splitlines()
    status = json.loads(last)
    assert status["rc"] == 0, out.stderr
    return json.loads("\n".join(body)), status["datasets"]


def test_the_fallback_is_read_without_importing_datasets_when_nothing_is_cached(hub_cache, tmp_path, tmp_path_factory):
    """Offline (or the Hub host not allowed) with no cache folder of the dataset, `datasets` could
    not load the split: the fallback is read at once, without importing it (seconds at start-up)."""
    spec = _spec(tmp_path, hub_cache["rows"])
    empty = tmp_path_factory.mktemp("empty_hf_home")
    plan, imported = _fresh_plan(spec, {"HF_HOME": str(empty), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    d = plan["datasets"]["arc"]
    assert d["source"] == "fallback" and "not in the local datasets cache" in d["hub_unavailable"]
    assert not imported
    plan, imported = _fresh_plan(spec, {"HF_HOME": str(empty), "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"})
    assert plan["datasets"]["arc"]["source"] == "fallback" and "--allow-host" in plan["datasets"]["arc"]["hub_unavailable"]
    assert not imported
    # the split in the local cache: `datasets` reads it (the Hub split is preferred to the fallback)
    plan, imported = _fresh_plan(spec, {"HF_HOME": str(hub_cache["home"]), "HF_HUB_OFFLINE": "1",
                                        "HF_DATASETS_OFFLINE": "1"})
    assert plan["datasets"]["arc"]["source"] == "hub" and imported


def test_a_local_spec_plans_without_importing_datasets(tmp_path):
    """A spec whose datasets are local files never touches the Hub client."""
    repo = Path(__file__).resolve().parents[2]
    _, imported = _fresh_plan(repo / "examples" / "quickstart.audit", {})
    assert not imported
