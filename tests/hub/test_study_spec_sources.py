"""The study spec s000 as a user plans it: `auditc plan specs/s000...` reads ARC-Challenge from
a prepared Hub cache when it holds the split, else from the local copy named as its fallback,
and says which; the two plans differ in hash (planning again gives the same hash: see
test_hub_fallback.py, on a small spec)."""

from __future__ import annotations

from pathlib import Path

from hub_specs import plan_json

REPO = Path(__file__).resolve().parents[2]
S000 = REPO / "specs" / "s000_multivariant_audit.audit"


def _plan(capsys, *args: str) -> dict:
    return plan_json(capsys, S000, "--no-requests", *args)


def test_s000_arc_from_the_hub_cache_or_its_fallback(offline_hub, shared_data, tmp_path, capsys, monkeypatch):
    import datasets

    hub = _plan(capsys, "--data-root", str(shared_data))
    arc = hub["datasets"]["arc"]
    assert arc["source"] == "hub" and arc["hub_id"] == "allenai/ai2_arc" and arc["commit"] == offline_hub["commit"]
    assert arc["n_items"] == 60 and arc["n_sample"] == 60  # the prepared cache holds 60 rows
    assert any(n.startswith("dataset 'arc': read from the Hub") for n in hub["notes"])
    # the other Hub datasets are not in the cache: each is read from its local copy, and says so
    for d, f in (("sst2", "sst2.jsonl"), ("ag_news", "ag_news.jsonl"), ("mmlu_pro", "mmlu_pro.jsonl")):
        assert hub["datasets"][d]["source"] == "fallback" and hub["datasets"][d]["fallback_file"] == f
        assert any(n.startswith(f"dataset '{d}': read from its fallback file {f}") for n in hub["notes"])
    assert "source" not in hub["datasets"]["mnli"]  # a local file only (LANGUAGE GAP in the spec)

    empty = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(empty))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", empty / "datasets")
    local = _plan(capsys, "--data-root", str(shared_data))
    arc = local["datasets"]["arc"]
    assert arc["source"] == "fallback" and arc["fallback_file"] == "arc_challenge.jsonl"
    assert arc["n_items"] == 1172 and arc["n_sample"] == 500
    assert local["hash"] != hub["hash"]
    assert {d: i.get("sha256") for d, i in local["datasets"].items()} == \
           {d: i.get("sha256") for d, i in hub["datasets"].items() if d != "arc"} | {"arc": arc["sha256"]}
