"""Every command that can reach the Hugging Face Hub asks the same consent (issue 24 item 2).

The Hub endpoint is a loopback server that counts connections, named ``hub.test`` so auditlang
must treat it as a remote host (``HF_ENDPOINT=http://hub.test:PORT``). Without
``--allow-host hub.test``: `auditc plan` and `auditc show` do not contact it and say so, `auditc
run` refuses a model whose weights would come from it (E180), and the plan lists the weights
download. With consent the Hub token ($HF_TOKEN) is still withheld unless ``--allow-secret
HF_TOKEN``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .hosts import Recorder, auditc

TOKEN = "hf_SECRET_TOKEN_4242"
ROWS = "".join(json.dumps({"id": f"q{i}", "question": f"Q{i}?", "choices": ["a", "b"], "answer": "a"}) + "\n"
               for i in range(4))

HUB_SPEC = """import "stdlib/s000"
dataset d = hub("someorg/somedata", "test", task=multiple_choice, size=4)
model m = embedded("smollm2-135m-instruct", max_tokens=4)
audit a {
  models = [m]
  datasets = [d]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
}
"""

WEIGHTS_SPEC = """import "stdlib/s000"
dataset d = jsonl("d.jsonl", task=multiple_choice)
model m = hf("someorg/somemodel", max_tokens=4, device="cpu")
audit a {
  models = [m]
  datasets = [d]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    pytest.importorskip("datasets")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "auditlang.toml").write_text("", encoding="utf-8")
    (proj / "d.jsonl").write_text(ROWS, encoding="utf-8")
    (proj / "hub.audit").write_text(HUB_SPEC, encoding="utf-8")
    (proj / "weights.audit").write_text(WEIGHTS_SPEC, encoding="utf-8")
    return proj


def _env(tmp_path: Path, hub: Recorder) -> dict[str, str]:
    return {"HF_ENDPOINT": f"http://hub.test:{hub.port}", "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hf"),
            "HF_DATASETS_OFFLINE": "", "HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "",
            "AUDITLANG_CONFIG": str(tmp_path / "none.toml"), "HF_HUB_ETAG_TIMEOUT": "3", "HF_HUB_DOWNLOAD_TIMEOUT": "3"}


def test_plan_and_show_do_not_contact_a_hub_the_user_did_not_allow(project, tmp_path):
    with Recorder() as hub:
        env = _env(tmp_path, hub)
        p = auditc(["plan", "hub.audit"], project, env, tmp_path)
        assert p.returncode == 0, p.stderr
        assert hub.connections == 0
        assert f"dataset d: http://hub.test:{hub.port}/datasets/someorg/somedata" in p.stdout
        assert "NOT ALLOWED (not contacted" in p.stdout and "--allow-host hub.test" in p.stdout
        assert "Hub token $HF_TOKEN: not sent (--allow-secret HF_TOKEN sends it)" in p.stdout
        s = auditc(["show", "hub.audit", "*"], project, env, tmp_path)
        assert s.returncode == 1 and "--allow-host hub.test" in s.stderr and "Traceback" not in s.stderr
        assert hub.connections == 0
        # with consent the Hub is asked (here it has no such dataset), without the token
        p = auditc(["plan", "hub.audit", "--allow-host", "hub.test"], project, env, tmp_path)
        assert p.returncode == 0, p.stderr
        assert hub.requests and not hub.saw_header("authorization")
        assert TOKEN not in p.stdout + p.stderr


def test_hub_weights_need_consent_and_the_token_is_withheld(project, tmp_path):
    with Recorder() as hub:
        env = _env(tmp_path, hub)
        p = auditc(["plan", "weights.audit"], project, env, tmp_path)
        assert p.returncode == 0, p.stderr
        assert "network: none" not in p.stdout
        assert f"weights m: http://hub.test:{hub.port}/someorg/somemodel" in p.stdout
        assert "NOT ALLOWED: auditc run needs --allow-host hub.test" in p.stdout
        r = auditc(["run", "weights.audit", "--out", "runs/w", "--display", "none"], project, env, tmp_path)
        assert r.returncode == 1, r.stderr
        assert "error[E180]" in r.stderr and "weights.audit:3:" in r.stderr and "download its weights" in r.stderr
        assert hub.connections == 0 and not (project / "runs").exists()
        # allowed: the weights are asked for (the fake Hub has none: exit 3), with no token
        r = auditc(["run", "weights.audit", "--out", "runs/w", "--display", "none", "--allow-host", "hub.test"],
                   project, env, tmp_path)
        assert r.returncode == 3, r.stderr
        assert hub.requests and not hub.saw_header("authorization")
        n = len(hub.requests)
        r = auditc(["run", "weights.audit", "--out", "runs/w", "--display", "none", "--allow-host", "hub.test",
                    "--allow-secret", "HF_TOKEN"], project, env, tmp_path)
        assert r.returncode == 3, r.stderr
        assert any(h.get("authorization") == f"Bearer {TOKEN}" or h.get("Authorization") == f"Bearer {TOKEN}"
                   for _, _, h in hub.requests[n:])
