"""Guards for the layering in ARCHITECTURE.md (issue 13, item 5).

* every import between auditlang packages points down the layer order, imports inside functions
  included, and no modules form an import cycle;
* an import inside a function carries a one-line reason comment (``# lazy: ...``);
* compiling, planning, checking and reporting load no engine module and no torch / transformers /
  vLLM (a subprocess, so the test sees a fresh interpreter);
* `auditc --version` and `auditc check` on a study spec load no pandas, no engine and no report
  code (issue 26, item 5; the times are measured by benchmarks/bench_startup.py, not here).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "auditlang"
SHARED_DATA = REPO.parent / "shared" / "data"

# ARCHITECTURE.md's table, top (imports nothing) to bottom.
LAYERS = ["core", "stdlib_location", "syntax", "metrics", "prompts", "resolve", "data", "evaluators",
          "protocols", "plan", "store", "engines", "execute", "score", "report", "api", "scaleout", "lsp", "cli", "__init__"]


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return mods


MODS = _modules()


def _package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


# Calls of importlib.import_module whose module is not a literal: each is a deliberate late-binding
# point (the registry's "module:attr" implementations and built-in tables, a subcommand's module),
# listed here with its reason so a new one is a decision, not an accident.
DYNAMIC_IMPORTS = {
    "auditlang.core.registry": "built-in tables and lazy 'module:attr' implementations of later layers, by design",
    "auditlang.engines.registry": "an engine class named in core/capabilities.py's table",
}


def _import_module_target(node: ast.Call, mod: str) -> str | None:
    """The module an ``importlib.import_module(...)`` call imports: a literal, or the literal prefix
    of an f-string (``f"auditlang.cli.{name}"`` -> the package ``auditlang.cli``); ``""`` when the
    argument is computed."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.FormattedValue) and isinstance(head.value, ast.Name) and head.value.id == "__name__":
            return mod
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".")
    return ""


def _imports(mod: str, path: Path):
    """(target module, line, inside a function, source line, previous line) for every internal import:
    ``import``, ``from ... import`` (``from auditlang import x`` is an import of the package
    ``auditlang`` itself unless ``x`` is a submodule) and ``importlib.import_module("...")``."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    tree = ast.parse(src)
    in_fn: set[int] = set()
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_fn.update(id(n) for n in ast.walk(f) if n is not f)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = _import_module_target(node, mod)
            if target is None:
                continue
            line = lines[node.lineno - 1]
            prev = lines[node.lineno - 2] if node.lineno > 1 else ""
            if target == "":
                yield "?", node.lineno, id(node) in in_fn, line, prev
            elif target.split(".")[0] == "auditlang" and target in MODS and target != mod:
                yield target, node.lineno, id(node) in in_fn, line, prev
            continue
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names]  # submodules, or names defined in ``base``
            names = ([base] if any(t not in MODS for t in subs) else []) + [t for t in subs if t in MODS]
        line = lines[node.lineno - 1]
        prev = lines[node.lineno - 2] if node.lineno > 1 else ""
        for t in names:
            if t.split(".")[0] != "auditlang":
                if id(node) in in_fn:
                    yield None, node.lineno, True, line, prev
                break
            own_package = mod.startswith(t + ".") and t != "auditlang"
            if t in MODS and t != mod and (not own_package):
                yield t, node.lineno, id(node) in in_fn, line, prev


def test_layers_listed_cover_every_package() -> None:
    assert {_package(m) for m in MODS} <= set(LAYERS)


def test_imports_point_down_the_layers() -> None:
    bad = []
    for mod, path in MODS.items():
        for target, line, _, _, _ in _imports(mod, path):
            if target in (None, "?"):
                continue
            a, b = _package(mod), _package(target)
            if a != b and LAYERS.index(b) > LAYERS.index(a):
                bad.append(f"{path.relative_to(REPO)}:{line}: {a} imports {b} ({target})")
    assert not bad, "imports against the layer order (ARCHITECTURE.md):\n" + "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    graph = {m: set() for m in MODS}
    for mod, path in MODS.items():
        for target, *_ in _imports(mod, path):
            if target not in (None, "?"):
                graph[mod].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_computed_imports_are_the_known_late_binding_points() -> None:
    found = {mod for mod, path in MODS.items() for target, *_ in _imports(mod, path) if target == "?"}
    assert found == set(DYNAMIC_IMPORTS), ("importlib.import_module with a computed module name outside the known "
                                           f"late-binding points (or one of them gone): {sorted(found ^ set(DYNAMIC_IMPORTS))}")


def test_the_layer_test_sees_every_form_of_import(tmp_path: Path) -> None:
    src = tmp_path / "probe.py"
    src.write_text("import importlib\nfrom auditlang import __version__\nfrom auditlang import stdlib_location\n"
                   "def f():\n    return importlib.import_module('auditlang.report.html')  # lazy: test\n", encoding="utf-8")
    found = {t for t, *_ in _imports("auditlang.core.probe", src)}
    assert found == {"auditlang", "auditlang.stdlib_location", "auditlang.report.html"}


LAZY = re.compile(r"#\s*lazy:\s*(\S+(?:\s+\S+){2,})")  # ``# lazy:`` and a reason of three words or more


ABOVE = re.compile(r"#\s*lazy:\s*(see|as) above\b")  # the reason of the import on the line just above


def _lazy_reason(text: str, prev: str) -> bool:
    if ABOVE.search(text):
        return "# lazy:" in prev
    return bool(LAZY.search(text) or (prev.strip().startswith("#") and LAZY.search(prev)))


def _runs_at_import(nodes):
    """The statements that run when the module is imported: not function bodies, not
    ``if TYPE_CHECKING:`` blocks."""
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            yield from _runs_at_import(n.orelse)
            continue
        yield n
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _runs_at_import(getattr(n, field, []) or [])


def _runs_at_import(nodes):
    """The statements that run when the module is imported: not function bodies, not
    ``if TYPE_CHECKING:`` blocks."""
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            yield from _runs_at_import(n.orelse)
            continue
        yield n
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _runs_at_import(getattr(n, field, []) or [])


def _top_level_targets(mod: str, path: Path) -> set[str]:
    """What ``mod`` imports at module level: auditlang modules and external top-level packages."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for n in _runs_at_import(tree.body):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
            out.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module:
            base = n.module
            if n.level:
                pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - n.level + 1] + [n.module])
            out.update({base, base.split(".")[0]})
            out.update(f"{base}.{a.name}" for a in n.names if f"{base}.{a.name}" in MODS)
    return out


def _loaded_at_import(mod: str, memo: dict[str, set[str]]) -> set[str]:
    """Every module (auditlang or external package) that importing ``mod`` loads: its top-level
    imports, transitively through auditlang modules (and the packages above it)."""
    if mod in memo:
        return memo[mod]
    memo[mod] = set()
    out = set(_top_level_targets(mod, MODS[mod]))
    parents = [".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)]
    for t in [*list(out), *parents]:
        if t in MODS and t != mod:
            out |= {t} | _loaded_at_import(t, memo)
    memo[mod] = out
    return out


def _lazy_imports():
    """(module, path, target, line, text, prev) for every import inside a function."""
    for mod, path in MODS.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = path.read_text(encoding="utf-8").splitlines()
        for f in ast.walk(tree):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(f):
                targets = []
                if isinstance(n, ast.Import):
                    targets = [a.name for a in n.names]
                elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
                    subs = [f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in MODS]
                    targets = subs or [n.module]
                elif isinstance(n, ast.Call) and _import_module_target(n, mod):
                    targets = [_import_module_target(n, mod)]
                for t in targets:
                    yield mod, path, t, n.lineno, lines[n.lineno - 1], lines[n.lineno - 2] if n.lineno > 1 else ""


def test_imports_inside_functions_say_why() -> None:
    bad = []
    for _, path, _, line, text, prev in _lazy_imports():
        if not _lazy_reason(text, prev):
            bad.append(f"{path.relative_to(REPO)}:{line}: {text.strip()}")
    assert not bad, ("imports inside functions need a one-line reason comment (# lazy: <reason>, three words or more):\n"
                     + "\n".join(sorted(set(bad))))


def test_a_lazy_import_is_not_of_what_the_module_already_loads() -> None:
    """A ``# lazy:`` import whose target the module's own top-level imports already load saves
    nothing: its reason is false (issue 37, item 5)."""
    memo: dict[str, set[str]] = {}
    bad = []
    for mod, path, target, line, text, _ in _lazy_imports():
        if target == mod:
            continue
        loaded = _loaded_at_import(mod, memo)
        if target in loaded or (target not in MODS and target.split(".")[0] in loaded and "." not in target):
            bad.append(f"{path.relative_to(REPO)}:{line}: {text.strip()}")
    assert not bad, ("these imports inside functions name what the module already loads at import time "
                     "(move them to the top):\n" + "\n".join(sorted(set(bad))))


def test_the_lazy_guards_see_dunder_import_and_false_reasons(tmp_path: Path) -> None:
    src = tmp_path / "probe.py"
    src.write_text("def f():\n    return __import__('auditlang.report.html')\n", encoding="utf-8")
    assert {t for t, *_ in _imports("auditlang.core.probe", src)} == {"auditlang.report.html"}
    assert not _lazy_reason("    import numpy  # x", "") and not _lazy_reason("    import numpy  # lazy:", "")
    assert _lazy_reason("    import numpy  # lazy: only the bootstrap needs it", "")


PROBE = """
import sys
from auditlang.cli import main
rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "vllm")
               or m.startswith("auditlang.engines"))
print("PROBE", rc, ",".join(heavy))
"""


def _probe(*args: str, cwd: Path) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}, timeout=600)
    line = [x for x in out.stdout.splitlines() if x.startswith("PROBE")]
    assert line, out.stderr[-2000:]
    _, rc, heavy = line[-1].split(" ", 2) if line[-1].count(" ") == 2 else (*line[-1].split(" "), "")
    return int(rc), heavy


def test_check_plan_and_report_load_no_engine(tmp_path: Path) -> None:
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    spec = tmp_path / "a.audit"
    spec.write_text("""import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=1)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
}
report cells, checklist
""", encoding="utf-8")
    assert _probe("check", str(spec), cwd=tmp_path) == (0, "")
    assert _probe("plan", str(spec), "--data-root", str(SHARED_DATA), cwd=tmp_path) == (0, "")
    # a run with the dry-run engine loads the dryrun engine module only (that is its engine)
    rc = subprocess.run([sys.executable, "-m", "auditlang.cli", "run", str(spec), "--data-root", str(SHARED_DATA),
                         "--out", str(tmp_path / "run"), "--engine", "dryrun", "--no-progress"],
                        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                                                           "HOME": str(tmp_path)}, timeout=600)
    assert rc.returncode == 0, rc.stderr[-2000:]
    assert _probe("report", str(tmp_path / "run"), cwd=tmp_path) == (0, "")
    assert _probe("status", str(tmp_path / "run"), cwd=tmp_path) == (0, "")
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["format"] == "auditlang.run/2"


STARTUP_PROBE = """
import sys
from auditlang.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "pyarrow", "matplotlib", "torch", "transformers",
                                                           "numpy", "scipy")
                or m.startswith(("auditlang.engines.", "auditlang.report", "auditlang.score", "auditlang.execute.")))
print("PROBE", rc, len([m for m in sys.modules if m.startswith("auditlang")]), ",".join(loaded))
"""


def _startup(*args: str) -> tuple[int, int, str]:
    out = subprocess.run([sys.executable, "-c", STARTUP_PROBE, *args], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO),
                              "AUDITLANG_NO_PLUGINS": "1"}, timeout=600)
    line = [x for x in out.stdout.splitlines() + out.stderr.splitlines() if x.startswith("PROBE")]
    assert line, out.stderr[-2000:]
    _, rc, n, *heavy = line[-1].split(" ")
    return int(rc), int(n), "".join(heavy)


def test_version_and_check_load_no_pandas_engine_or_report() -> None:
    """``auditc check`` validates metric parameters from their ``Params`` models (metrics/registry.py),
    so it loads no numpy or scipy either (issue 37, item 5)."""
    rc, n, heavy = _startup("--version")
    assert (rc, heavy) == (0, "") and n <= 8, f"`auditc --version` loaded {n} auditlang modules: {heavy}"
    for spec in sorted(str(p.relative_to(REPO)) for p in (REPO / "specs").glob("*.audit")):  # every protocol kind
        rc, _, heavy = _startup("check", spec)
        assert (rc, heavy) == (0, ""), f"`auditc check {spec}` loaded {heavy}"


RUN_DIR_NAMES = ("records.parquet", "records.jsonl", "journal.sqlite", "run.json", "plan.json", "cells.csv",
                 "heartbeat.json", "run.lock", "plan.requests.tsv.gz")


def test_run_directory_names_are_spelled_only_in_store_rundir() -> None:
    """One owner for the run directory's layout (issue 26, item 2): code builds its paths from
    store/rundir.py's constants; messages, docstrings and comments may mention the names."""
    bad = []
    for mod, path in MODS.items():
        if mod == "auditlang.store.rundir":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and " " not in node.value.strip()):  # a name or path, not a sentence
                hits = [n for n in RUN_DIR_NAMES if n in node.value]
                if hits:
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {hits[0]}")
    assert not bad, "run-directory names outside store/rundir.py (use its constants):\n" + "\n".join(bad)


# the builders of run-time requests from stored outputs (plan/stage2.py, plan/crossdata.py)
JOURNAL_BUILDERS = {"stage2_requests", "cross_requests", "item_stage2", "source_followups", "CrossData"}


def test_followups_are_rebuilt_from_the_journal_by_one_owner() -> None:
    """One owner for rebuilding follow-up (stage-2), judge and cross-stage requests from the journal
    (issue 26, item 2): outside plan/, code goes through plan/from_journal.py's FromJournal (the
    runner, `api.missing_requests` and scoring), never the builders themselves."""
    bad = []
    for mod, path in MODS.items():
        if mod.startswith("auditlang.plan."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("auditlang.plan"):
                bad += [f"{path.relative_to(REPO)}:{node.lineno}: {a.name}" for a in node.names if a.name in JOURNAL_BUILDERS]
            elif isinstance(node, ast.Attribute) and node.attr in JOURNAL_BUILDERS:
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.attr}")
    assert not bad, "requests rebuilt from the journal outside plan/from_journal.py (use FromJournal):\n" + "\n".join(bad)
    for mod in ("auditlang.execute.runner", "auditlang.api", "auditlang.score.stage"):
        assert "FromJournal(" in MODS[mod].read_text(encoding="utf-8"), mod


# exceptions that never leave the module that raises them (internal control flow)
INTERNAL_EXCEPTIONS = {"auditlang.engines.openai_engine.RequestFailed", "auditlang.execute.executor._BatchFailed",
                       "auditlang.prompts.sandbox.BudgetError"}  # rendering turns it into a TemplateError


def test_every_deliberate_error_is_under_the_one_root() -> None:
    """ARCHITECTURE.md: everything raised on purpose derives from core.errors.AuditlangError (so the
    CLI prints it with its hint and exit code, never as an internal error)."""
    code = ("import importlib, inspect, json, pkgutil, sys, auditlang\n"
            "from auditlang.core.errors import AuditlangError\n"
            "out = []\n"
            f"for m in {sorted(m for m in MODS if not m.startswith(('auditlang.engines.hf', 'auditlang.engines.vllm', 'auditlang.lsp.server', 'auditlang.scaleout')) and not m.endswith('__main__'))!r}:\n"
            "    mod = importlib.import_module(m)\n"
            "    for n, c in vars(mod).items():\n"
            "        if inspect.isclass(c) and issubclass(c, Exception) and c.__module__ == m and not issubclass(c, AuditlangError):\n"
            "            out.append(f'{m}.{n}')\n"
            "print(json.dumps(sorted(set(out))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)}, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    outside = set(json.loads(r.stdout.splitlines()[-1])) - INTERNAL_EXCEPTIONS
    assert not outside, f"errors outside the AuditlangError root: {sorted(outside)}"
