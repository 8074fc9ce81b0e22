"""Bulk fuzz of the compiler (issue 40): seeded specs (NUL bytes, names over 255 bytes, deep
nesting, huge literals, random bytes and tokens, mutations of the shipped specs) through
``resolve.compile_spec`` and, when one compiles, planning without data. Every exception must be of
the documented ``AuditlangError`` family; anything else is a bug and is listed with the seed that
reproduces it.

The default run (``pytest -q``) takes the first 1,000 cases (every kind, ~1 min on one core;
most of it planning a few mutated shipped specs); the full bulk run is the first 10,000 of the same
sequence: ``FUZZ_N=10000 python -m pytest tests/language/test_fuzz_bulk.py`` (10-20 min on one
core), which ``.ci/run`` runs beside the suite. ``FUZZ_SEED`` starts another sequence (docs/security.md).
"""

from __future__ import annotations

import os
import random
import time
import traceback
from pathlib import Path

from auditlang.core.errors import AuditlangError
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec

REPO = Path(__file__).resolve().parents[2]
N = int(os.environ.get("FUZZ_N", "1000"))  # FUZZ_N=10000: the full bulk run
SEED = int(os.environ.get("FUZZ_SEED", "40"))
SOURCES = sorted([*REPO.glob("examples/*.audit"), *REPO.glob("specs/*.audit"), *REPO.glob("stdlib/*.audit")])
TEXTS = [p.read_text(encoding="utf-8") for p in SOURCES]
LINES = [ln for t in TEXTS for ln in t.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
TOKENS = ["dataset", "model", "template", "variant", "protocol", "evaluator", "metric", "audit", "compare",
          "report", "settings", "import", "with", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", '"', '"""',
          "jsonl", "csv", "hub", "hf", "vllm", "openai", "embedded", "token_prob", "verbalized", "first_char",
          "accuracy", "ece", "bootstrap", "true", "false", "none", "on", "off", "auto", "1", "-3.5", "1e400",
          "9" * 50, "x", "y", "s000", "\n", "#", "\x00", "\\", "\\u0000", "'", "é", "\U0001F600", "\t"]


def _mutate(rng: random.Random, text: str, rounds: int) -> str:
    for _ in range(rounds):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(5)
        if op == 0:
            text = text[:i] + text[i + rng.randint(1, 12):]
        elif op == 1:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif op == 2:
            j = min(len(text), i + rng.randint(1, 40))
            text = text[:j] + text[i:j] + text[j:]
        elif op == 3:
            text = text[:i] + chr(rng.choice([0, 1, 0x7F, 0xFFFD, 0x202E, rng.randrange(0x20, 0x3000)])) + text[i:]
        else:
            text = text[:i] + " " + "".join(rng.choice("abcxyz_09") for _ in range(rng.randint(1, 8))) + text[i:]
    return text


def _chunk(rng: random.Random) -> str:
    start = rng.randrange(len(LINES))
    return "\n".join(LINES[start:start + rng.randint(1, 8)]) + "\n"


def _spec(rng: random.Random, kind: str) -> str | bytes:
    if kind == "mutated":
        return _mutate(rng, _chunk(rng), rng.randint(0, 4))
    if kind == "nul":
        t = _chunk(rng)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(t) + 1)
            t = t[:i] + "\x00" + t[i:]
        return t
    if kind == "long_name":
        n = rng.choice([129, 255, 256, 300, 1000])
        name = rng.choice("abz_") * n
        return rng.choice([f"model {name} = hf(\"x\")\n", f'dataset d = jsonl("{name}.jsonl", task=multiple_choice)\n',
                           f'import "{name}"\n', f"audit {name} {{ models = [m] }}\n",
                           f'template t = template(file="{name}/{name}")\n', f'model m = hf("{name}")\n',
                           f"protocol p = {name}.x\n", f'settings {{ data_root = "{name}" }}\n'])
    if kind == "deep":
        n = rng.choice([10, 63, 64, 65, 200, 3000])
        return rng.choice([f"x = {'[' * n}1{']' * n}\n", f"x = {'(' * n}1{')' * n}\n", "audit a {" * n + "}" * n,
                           'template t = template("' + "{% if true %}" * n + "{% endif %}" * n + '")\n',
                           'template t = template("{{ ' + "(" * n + "1" + ")" * n + ' }}")\n',
                           'import "stdlib/s000"\nprotocol p0 = s000.token_norm\n'
                           + "".join(f"protocol p{i + 1} = p{i} with (top_k=2)\n" for i in range(min(n, 110)))])
    if kind == "huge":
        n = rng.choice([1000, 100_000, 2_100_000]) if rng.random() < 0.02 else rng.choice([100, 5000, 20_000])
        return rng.choice([f'dataset d = jsonl("{"a" * n}", task=multiple_choice)\n',
                           f'template t = template("""{"x" * n}""")\n',
                           f"dataset d = jsonl(\"d.jsonl\", task=multiple_choice, sample={'9' * min(n, 5000)})\n",
                           f"x = [{', '.join(['1'] * (n // 10))}]\n",
                           f"dataset d = jsonl(\"d.jsonl\", task=multiple_choice, seed={rng.choice(['1e400', '-' + '7' * 400, '1.' + '5' * 500])})\n",
                           f"settings {{ seed = {'9' * min(n, 5000)} }}\n"])
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    if kind == "bytes_in_spec":
        raw = _chunk(rng).encode()
        i = rng.randrange(len(raw) + 1)
        return raw[:i] + bytes([rng.choice([0x80, 0xC3, 0xE9, 0xFF, 0xFE])]) + raw[i:]
    if kind == "tokens":
        return " ".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 40)))
    return _mutate(rng, rng.choice(TEXTS), rng.randint(0, 3))  # "whole": a shipped spec, mutated


KINDS = (["mutated"] * 40 + ["nul"] * 8 + ["long_name"] * 6 + ["deep"] * 4 + ["huge"] * 6 + ["bytes"] * 8
         + ["bytes_in_spec"] * 6 + ["tokens"] * 22 + ["whole"] * 1)


def test_bulk_fuzz_only_auditlang_errors(tmp_path: Path) -> None:
    (tmp_path / "auditlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "stdlib").mkdir()  # `import "stdlib/..."` still names the real standard library
    path = tmp_path / "fuzz.audit"
    failures: list[str] = []
    compiled = planned = 0
    t0 = time.monotonic()
    for i in range(N):
        rng = random.Random(SEED * 1_000_003 + i)
        kind = rng.choice(KINDS)
        spec = _spec(rng, kind)
        try:
            if isinstance(spec, bytes):
                path.write_bytes(spec)
                s = compile_spec(path)
            else:
                s = compile_spec(path, text=spec)
            compiled += 1
            if list(s.of_kind("audit")):
                build_plan(s, load_data=False)
                planned += 1
        except AuditlangError:
            pass
        except RecursionError:
            failures.append(f"case {i} ({kind}, FUZZ_SEED={SEED}): RecursionError")
        except Exception as e:  # noqa: BLE001 - every other exception is a bug to report
            tb = traceback.format_exc().splitlines()
            failures.append(f"case {i} ({kind}, FUZZ_SEED={SEED}): {type(e).__name__}: {e}"[:300] + "\n  " + "\n  ".join(tb[-6:]))
    elapsed = time.monotonic() - t0
    assert not failures, f"{len(failures)} of {N} specs raised a non-auditlang exception:\n" + "\n".join(failures[:8])
    assert compiled > 0
    print(f"{N} specs in {elapsed:.0f} s: {compiled} compiled, {planned} planned")
