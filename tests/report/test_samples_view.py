"""`auditc view RUN_DIR` (issue 35): the sample browser over a real run, in headless Chromium.

A scripted-engine spec with a token, a verbalized and a P(True) protocol runs through
`auditc run`; `auditc view` (a subprocess, as a user types it) writes report/samples.html and
samples.data.js; Chromium renders the rows, the correctness filter (from the URL and by changing
the select as a user does), the detail of one item with its follow-up prompt, and a synthetic
10k-item run a page at a time. Model output holding markup is shown as text.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.core.requests import Message, Prompt, Request, Result
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y chromium)")
REPO = Path(__file__).resolve().parents[2]

SPEC = """import "stdlib/s000"
import "stdlib/s002"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=4)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal, s002.p_true]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""
MARKUP = "<script>alert(1)</script><b>x</b>"  # an answer no page may run or render as markup


def _script(req: Request) -> Result | None:
    text = prompt_text(req)
    k = sum(map(ord, text)) % 4
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: -0.1 - i * (k + 1) for i, c in enumerate(req.p["choices"])})
    if req.kind == "generate" and "confidence" in text:
        return generation(req, f"0.{k + 5}" if "number is 2?" not in text else "quite sure")
    if req.kind == "generate" and "number is 5?" in text:
        return Result(request_id=req.id, kind=req.kind, error="simulated engine failure")
    if req.kind == "generate":
        return generation(req, MARKUP if "number is 1?" in text else "ABCA"[k])
    return None


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def viewed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("view")
    mp = pytest.MonkeyPatch()
    try:
        use_scripted_engine(mp, _script)
        (tmp / "data").mkdir()
        (tmp / "data" / "arc.jsonl").write_text(number_items(10), encoding="utf-8")
        (tmp / "s.audit").write_text(SPEC, encoding="utf-8")
        rc = main(["run", str(tmp / "s.audit"), "--data-root", str(tmp / "data"), "--out", str(tmp / "run"), "--no-progress"])
    finally:
        mp.undo()
    assert rc == 4  # the failed request: an error, counted, never an answer
    res = _cli("view", str(tmp / "run"))
    assert res.returncode == 0, res.stderr
    assert "samples written:" in res.stdout and "samples.html" in res.stdout
    return tmp / "run"


def _data(run: Path) -> dict:
    text = (run / "report" / "samples.data.js").read_text(encoding="utf-8")
    assert text.startswith("window.AUDITC_SAMPLES = ")
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


def test_view_writes_every_record_with_its_prompts_and_followups(viewed: Path) -> None:
    data = _data(viewed)
    records = pd.read_parquet(viewed / "records.parquet")
    assert len(data["rows"]) == len(records) == 30
    F = {name: i for i, name in enumerate(data["fields"])}
    by_protocol: dict[str, list] = {}
    for r in data["rows"]:
        by_protocol.setdefault(data["cells"][r[F["cell"]]]["protocol"], []).append(r)
    # the follow-ups: the verbal and P(True) prompts with the stored answer in them, and their answers
    for protocol, role, needle in (("s000.verbal_decimal", "verbal", "state your confidence"),
                                   ("s002.p_true", "p_true", "Proposed Answer: ")):
        row = next(r for r in by_protocol[protocol] if r[F["item_id"]] == "q0")
        rid = row[F["roles"]][role]
        req = data["requests"][rid]
        sent = "\n".join(m[1] for m in req["messages"])
        assert needle in sent and "Which number is 0?" in sent
        assert data["results"][rid]  # its stored answer
        assert "no tokenizer available locally" in req["how"]  # said why no chat template is applied
    failed = [r for r in data["rows"] if r[F["status"]] == "error"]
    assert {r[F["item_id"]] for r in failed} == {"q5"} and all("simulated engine failure" in r[F["error"]] for r in failed)
    assert any(not r[F["confidence_parsed"]] for r in by_protocol["s000.verbal_decimal"])  # "quite sure"
    # keyed in id order: the file's bytes do not depend on the process's hash seed (they were set order)
    assert list(data["requests"]) == sorted(data["requests"]) and list(data["results"]) == sorted(data["results"])
    text = (viewed / "report" / "samples.data.js").read_text(encoding="utf-8")
    assert "<" not in text  # markup in model output cannot close or open an element
    assert MARKUP in json.dumps(data, ensure_ascii=False)
    page = (viewed / "report" / "samples.html").read_text(encoding="utf-8")
    assert "innerHTML" not in page and "http" not in page.replace("http-equiv", "")  # text only, no network


def test_report_writes_and_links_the_samples_page(viewed: Path) -> None:
    res = _cli("report", str(viewed))
    assert res.returncode == 0, res.stderr
    report = viewed / "report"
    assert 'href="samples.html"' in (report / "report.html").read_text(encoding="utf-8")
    manifest = json.loads((report / "manifest.json").read_text(encoding="utf-8"))
    assert {"samples.html", "samples.data.js"} <= set(manifest["files"])


PROBE = """<script>
window.__errs = [];
window.addEventListener('error', function (e) { window.__errs.push(String(e.message || e.type)); }, true);
window.addEventListener('load', function () {
  function rows() { return Array.prototype.map.call(document.querySelectorAll('#list tbody tr'), function (tr) {
    return {i: +tr.dataset.i, outcome: tr.dataset.outcome, status: tr.dataset.status}; }); }
  var out = {hash: rows(), count: document.getElementById('count').textContent,
             roles: Array.prototype.map.call(document.querySelectorAll('#detail .role'), function (d) { return d.dataset.role; }),
             detail: document.getElementById('detail').textContent,
             scripts: document.querySelectorAll('#detail script, #detail pre.answer b, #detail pre.generation b').length};
  var t0 = performance.now();
  var s = document.getElementById('f-outcome'); s.value = 'incorrect'; s.dispatchEvent(new Event('change'));
  out.clicked = rows(); out.clickedCount = document.getElementById('count').textContent; out.hashAfter = location.hash;
  out.ms = performance.now() - t0;
  var n = document.getElementById('next'); n.click(); out.page2 = rows(); out.page2Count = document.getElementById('count').textContent;
  out.errors = window.__errs;
  var m = document.createElement('pre'); m.id = 'probe'; m.textContent = 'PROBE' + JSON.stringify(out);
  document.body.appendChild(m);
});
</script>"""


def _open(report: Path, tmp: Path, fragment: str) -> dict:
    """The page (with the probe) in headless Chromium, at ``#fragment``: the probe's findings."""
    page = tmp / "probe.html"
    page.write_text((report / "samples.html").read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1),
                    encoding="utf-8")
    if (tmp / "samples.data.js") != report / "samples.data.js":
        shutil.copy(report / "samples.data.js", tmp / "samples.data.js")
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=20000", "--dump-dom",
                          page.as_uri() + fragment], capture_output=True, text=True, timeout=300)
    found = re.findall(r"PROBE(\{.*?\})</pre>", res.stdout)
    assert found, f"chromium did not run the page (rc={res.returncode}): {res.stderr[-2000:]}"
    return json.loads(html.unescape(found[-1]))  # the dump serialises the probe's text HTML-escaped


def _screenshot(page: str, png: Path, tmp: Path) -> bytes:
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    f"--user-data-dir={tmp / 'shot-profile'}", "--window-size=1400,1000", "--virtual-time-budget=10000",
                    f"--screenshot={png}", page], capture_output=True, text=True, timeout=300)
    assert png.is_file(), "chromium wrote no screenshot"
    return png.read_bytes()


def _distinct_colours(png: bytes) -> int:
    """How many distinct RGB colours a (8-bit RGB/RGBA, non-interlaced) PNG holds: a blank page has one."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, b"", None
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
    assert depth == 8 and ctype in (2, 6), hdr
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, colours = zlib.decompress(idat), w * bpp, bytearray(w * bpp), set()
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 8 == 0:
            colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 4))
        prev = line
    return len(colours)


@needs_chromium
def test_page_renders_rows_and_the_incorrect_filter_works(viewed: Path, tmp_path: Path) -> None:
    records = pd.read_parquet(viewed / "records.parquet")
    incorrect = int((records["correct"] == 0).sum())
    assert 0 < incorrect < len(records)
    verbal_q0 = next(i for i, (cid, item) in enumerate(zip(records["cell_id"], records["item_id"]))
                     if "verbal_decimal" in cid and item == "q0")
    got = _open(viewed / "report", tmp_path, f"#row={verbal_q0}")
    assert got["errors"] == []
    assert len(got["hash"]) == len(records) == 30 and got["count"].startswith("30 of 30 records match")
    assert got["roles"] == ["answer", "verbal"]  # the stage-1 answer and its verbalized-confidence follow-up
    assert "state your confidence" in got["detail"] and "chat messages as role-tagged text" in got["detail"]
    # a user picks "incorrect only": every row shown is incorrect, and all of them are there
    assert got["clicked"] and all(r["outcome"] == "incorrect" for r in got["clicked"])
    assert len(got["clicked"]) == incorrect and got["clickedCount"].startswith(f"{incorrect} of 30")
    assert "outcome=incorrect" in got["hashAfter"]
    # the same state from the address: the page opened at #outcome=incorrect shows the same rows
    again = _open(viewed / "report", tmp_path, "#outcome=incorrect&status=ok")
    assert [r["i"] for r in again["hash"]] == [r["i"] for r in got["clicked"] if r["status"] == "ok"]
    errors = _open(viewed / "report", tmp_path, "#status=error")
    assert {r["status"] for r in errors["hash"]} == {"error"} and len(errors["hash"]) == 3  # q5 in 3 cells
    markup = next(i for i, (cid, item) in enumerate(zip(records["cell_id"], records["item_id"])) if item == "q1")
    shown = _open(viewed / "report", tmp_path, f"#row={markup}")
    assert MARKUP in shown["detail"] and shown["scripts"] == 0 and shown["errors"] == []  # text, not markup
    png = _screenshot((viewed / "report" / "samples.html").as_uri() + f"#row={verbal_q0}", tmp_path / "view.png", tmp_path)
    assert _distinct_colours(png) > 8  # a rendered page, not a blank one


def _synthetic_run(run: Path, n: int) -> None:
    """A run directory holding what the page reads: ``n`` records and their journal rows."""
    from auditlang.store.journal import Journal
    from auditlang.store.records import ExampleRecord, write_records

    records, reqs, results = [], [], []
    for i in range(n):
        ask = Request.make("m", "generate", Prompt(messages=(Message("user", f"Question {i}: which letter? " * 8),)),
                           max_tokens=8)
        conf = Request.make("m", "generate", Prompt(messages=(Message("user", f"Question {i}"), Message("assistant", "A"),
                                                              Message("user", "How confident are you?"))), max_tokens=8)
        reqs += [ask, conf]
        results += [generation(ask, "ABCD"[i % 4]), generation(conf, f"0.{i % 10}")]
        records.append(ExampleRecord(cell_id="a/m/d/v/p/e", model="m", dataset="d", variant="v", protocol="p",
                                     evaluator="e", item_id=f"q{i}", item_index=i, gold="A", pred="ABCD"[i % 4],
                                     parsed=True, parse_rule="first_char", correct=float(i % 4 == 0),
                                     confidence=(i % 10) / 10, confidence_parsed=True, confidence_kind="verbalized",
                                     request_ids={"answer": ask.id, "verbal": conf.id}, generation="ABCD"[i % 4]))
    write_records(run / "records.parquet", records)
    with Journal(run) as j:
        fp = j.register_engine({"engine": "synthetic"}, "m")
        j.put_requests(reqs, fp)
        j.put_results(results, fp)
    (run / "fp").write_text(fp, encoding="utf-8")


@needs_chromium
def test_a_10k_item_run_stays_responsive(tmp_path: Path) -> None:
    from auditlang.report.samples import write_samples

    run = tmp_path / "big"
    run.mkdir()
    _synthetic_run(run, 10_000)
    t0 = time.perf_counter()
    page, js = write_samples(run, {"m": (run / "fp").read_text(encoding="utf-8")}, title="Samples: big")
    built = time.perf_counter() - t0
    assert built < 60, f"building the data of 10k records took {built:.1f} s"
    got = _open(run / "report", run / "report", "#page=3")
    assert got["errors"] == []
    assert len(got["hash"]) == 50 and got["count"] == "10000 of 10000 records match · page 4 of 200"
    assert [r["i"] for r in got["hash"]] == list(range(150, 200))  # page 4, a page at a time
    assert len(got["clicked"]) == 50 and got["clickedCount"].startswith("7500 of 10000")
    assert got["page2Count"].endswith("page 2 of 150")
    assert got["ms"] < 3000, f"a filter change over 10k records took {got['ms']:.0f} ms"
    png = _screenshot(page.as_uri() + "#outcome=correct&row=4", tmp_path / "big.png", tmp_path)
    assert _distinct_colours(png) > 8



def _converted(name: str) -> bool:
    from auditlang.engines import embedded

    d = embedded.checkpoint_dir(name)
    return embedded.read_provenance(d) is not None and (d / "config.json").is_file()


def test_view_applies_the_models_chat_template(tmp_path: Path) -> None:
    """On a model with a local tokenizer, `auditc view` shows each chat prompt as the engine
    renders it (the converted checkpoint's chat template; no weights loaded)."""
    pytest.importorskip("transformers")
    if not _converted("smollm2-135m-instruct"):
        pytest.skip("embedded smollm2-135m-instruct is not converted on this machine (`auditc run` converts it once)")
    mp = pytest.MonkeyPatch()
    try:
        use_scripted_engine(mp, _script)  # the hf engine, which serves embedded models, answers from the script
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "arc.jsonl").write_text(number_items(2), encoding="utf-8")
        spec = SPEC.replace('hf("org/scripted", dtype=float32, max_tokens=4)', 'embedded("smollm2-135m-instruct", max_tokens=4)')
        (tmp_path / "s.audit").write_text(spec, encoding="utf-8")
        rc = main(["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
                   "--no-progress", "--no-report"])
    finally:
        mp.undo()
    assert rc == 0
    res = _cli("view", str(tmp_path / "run"))
    assert res.returncode == 0, res.stderr
    data = _data(tmp_path / "run")
    verbal = [q for q in data["requests"].values() if "state your confidence" in q.get("text", "")]
    assert verbal and all(q["how"].startswith("chat template applied with the generation prompt: tokenizer of the "
                                              "converted embedded checkpoint 'smollm2-135m-instruct'") for q in verbal)
    assert "<|im_start|>assistant\n" in verbal[0]["text"] and verbal[0]["messages"][1][0] == "assistant"
    res = _cli("view", str(tmp_path / "run"), "--no-chat-template")
    assert all("text" not in q and q["how"].endswith("--no-chat-template, so no chat template applied here")
               for q in _data(tmp_path / "run")["requests"].values())


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_view_serve_on_loopback(viewed: Path, stop: str) -> None:
    """`auditc view RUN --serve --port 0` serves the page and its data on 127.0.0.1 until Ctrl-C or SIGTERM,
    also when started with SIGINT ignored (a background job of a non-interactive shell, as CI's runner
    started pytest once: Python then installs no Ctrl-C handler and the server ran on)."""
    import signal
    import urllib.request

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "auditlang.cli", "view", str(viewed), "--serve", "--port", "0",
                             "--no-chat-template"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = ""
        while "serving" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, proc.stderr.read()
        url = re.search(r"(http://127\.0\.0\.1:\d+/samples\.html)", line).group(1)
        page = urllib.request.urlopen(url, timeout=30).read().decode("utf-8")
        assert '<script src="samples.data.js"></script>' in page
        js = urllib.request.urlopen(url.replace("samples.html", "samples.data.js"), timeout=30).read().decode("utf-8")
        assert js.startswith("window.AUDITC_SAMPLES = ")
    finally:
        proc.send_signal(getattr(signal, stop))
        assert proc.wait(timeout=60) == 0


def test_view_serve_on_a_taken_port_is_a_usage_error(viewed: Path) -> None:
    """A port something else listens on is the user's choice gone wrong: exit 2 with the port and a hint,
    not an internal-error traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = _cli("view", str(viewed), "--serve", "--port", str(port), "--no-chat-template")
    assert res.returncode == 2, res.stderr
    assert f"--port {port}: cannot serve on 127.0.0.1:{port}" in res.stderr
    assert "--port 0 picks a free port" in res.stderr
    assert "internal error" not in res.stderr.lower() and "Traceback" not in res.stderr
