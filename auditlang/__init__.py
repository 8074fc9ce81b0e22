"""auditlang: a declarative language and compiler for reliability audits of language models.

The Python API mirrors the command line, one function per `auditc` command (docs/python.md)::

    import auditlang
    spec = auditlang.compile("audits/arc.audit")            # or the spec's text (auditc check: check)
    plan = auditlang.plan(spec, data_root="data")           # every cell and request, no model
    print(auditlang.show(spec, "*/smol/*", data_root="data"))
    run = auditlang.run(spec, out="runs/arc", data_root="data")   # progress shown (progress="auto")
    run.metrics, run.records, run.comparisons, run.report_dir
    again = auditlang.open_run("runs/arc")                  # a finished run, exactly as it ran
    auditlang.status("runs/arc"); auditlang.rescore("runs/arc", ["exact_match"])
    auditlang.diff("runs/a", "runs/b"); auditlang.merge("runs/all", ["runs/s0", "runs/s1"])

Each is a thin wrapper over the code its command runs (the functions of ``auditlang.cli.<command>``
that take no argparse arguments, and ``auditlang.api``): the same checks, errors and files.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from auditlang.core.version import __version__

__all__ = ["CompileError", "__version__", "check", "compile", "diff", "fmt", "merge", "open_run", "plan", "rescore",
           "run", "show", "status", "view", "write_report"]

# `auditc` subcommand -> its function here (tests/test_python_api.py checks every subcommand has one);
# `auditc lsp` is the editors' language server, started by them, not a function call
COMMANDS = {"check": "check", "plan": "plan", "show": "show", "fmt": "fmt", "run": "run", "rescore": "rescore",
            "report": "write_report", "diff": "diff", "merge": "merge", "status": "status", "view": "view"}


def __getattr__(name: str):
    """``auditlang.CompileError`` (what ``compile``, ``plan`` and ``run`` raise for a spec
    problem), imported on first use so `import auditlang` stays instant."""
    if name == "CompileError":
        from auditlang.core.diagnostics import CompileError  # lazy: `import auditlang` stays instant

        return CompileError
    raise AttributeError(f"module 'auditlang' has no attribute {name!r}")


def _model_args(model_args):
    """``model_args`` (each ``"MODEL.KEY=VALUE"`` as ``-M`` takes it) as ``ModelArg``s."""
    from auditlang.resolve.overrides import model_args as parse  # lazy: `import auditlang` stays instant

    return parse(list(model_args)) if model_args else None


def compile(source: str | Path, *, path: str | Path | None = None, model_args=()):  # noqa: A001  (mirrors `auditc check`)
    """A validated ``Spec`` from a spec file or a spec's text. Text is compiled as if it were the
    file ``path`` (default ``./<spec>.audit``: relative imports and data paths resolve from there).
    ``model_args``: option overrides of declared models, each ``"MODEL.KEY=VALUE"`` as
    ``auditc ... -M`` takes it. Raises ``CompileError`` (its ``.diagnostics`` carry file:line:col
    and hints)."""
    return check(source, path=path, model_args=model_args).spec


def check(source: str | Path, *, path: str | Path | None = None, model_args=()):
    """``auditc check``: the spec compiled and checked without data or models; returns a
    ``Checked`` (``spec``, ``warnings``, ``counts`` of declarations by kind, ``summary()``)."""
    from auditlang.cli.check import check_spec  # lazy: `import auditlang` stays instant
    from auditlang.resolve import compile_source  # lazy: see above

    return check_spec(compile_source(source, path, model_args=_model_args(model_args)))


def _spec(spec: Any):
    return spec if hasattr(spec, "objects") else compile(spec)


def plan(spec: Any, *, data_root: str | Path | None = None, limit: int | None = None):
    """The ``Plan`` of a spec (a ``Spec``, a path or spec text): cells, unique requests, counts.
    (Once any ``auditlang.plan`` submodule is imported, this name is the callable package, which
    does the same.)"""
    from auditlang.plan import build  # lazy: `import auditlang` stays instant

    return build(spec, data_root, limit)


def show(spec: Any, cell: str, *, item: int = 0, data_root: str | Path | None = None, limit: int | str | None = None,
         allow_hosts: list[str] | tuple[str, ...] = (), allow_secrets: list[str] | tuple[str, ...] = (),
         run: str | Path | None = None) -> str:
    """``auditc show``: the exact prompts of item ``item`` for every cell matching ``cell`` (a cell
    id or an fnmatch glob), follow-ups included, as the text the command prints (tokenizer only,
    no weights); ``run``: follow-ups built from that run directory's stored answers (``--run``)."""
    from auditlang.cli.show import show_plan, show_text  # lazy: `import auditlang` stays instant

    spec = _spec(spec)
    return show_text(spec, show_plan(spec, data_root, limit, allow_hosts, allow_secrets), cell, item, run_dir=run)


def fmt(source: str | Path, *, write: bool = False) -> str:
    """``auditc fmt``: the canonical layout of a spec file (a ``Path`` or a path ending in
    ``.audit``) or of spec text; ``write=True`` rewrites the file when it changes."""
    from auditlang.syntax.fmt import format_text  # lazy: `import auditlang` stays instant
    from auditlang.syntax.parse import parse_text  # lazy: see above

    is_file = isinstance(source, Path) or ("\n" not in str(source) and str(source).endswith(".audit"))
    text = Path(source).read_text(encoding="utf-8") if is_file else str(source)
    name = str(source) if is_file else "<spec>"
    parse_text(text, name)  # CompileError with diagnostics for a broken file
    out = format_text(text, name)
    if write and is_file and out != text:
        Path(source).write_text(out, encoding="utf-8")
    return out


def run(spec: Any, *, out: str | Path, data_root: str | Path | None = None, limit: int | str | None = None,
        engine: str | None = None, report: bool = True, progress: bool | str = "auto", executor: str | None = None,
        address: str | None = None, ray_shards: int | None = None,
        allow_hosts: list[str] | tuple[str, ...] = (), allow_secrets: list[str] | tuple[str, ...] = (),
        replace: bool = False, model_args=()):
    """Plan, execute (resumable), score and report a spec into the run directory ``out``; returns a
    ``Run`` with ``records``, ``metrics``, ``comparisons`` and ``report_dir``. ``engine`` overrides
    every model's engine (``"dryrun"`` runs no model). ``executor="ray"`` (default: the spec's
    ``settings executor``) runs on the Ray cluster at ``address`` in ``ray_shards`` item shards per
    model, reusing a Ray session already open in this process (docs/scale-out.md). As with
    ``auditc run``, a model may contact a non-loopback host or read an environment variable only
    when ``allow_hosts`` / ``allow_secrets`` (or the user config file) allow it (docs/security.md);
    otherwise ``CompileError`` (E180/E181). An ``out`` holding a run of another spec file is refused
    (``UserError``) unless ``replace=True`` (``auditc run --replace``). ``limit``: as
    ``--limit`` (a count, a fraction such as ``0.1`` or ``"10%"``, a range ``"10:20"``).
    ``progress``: ``"auto"`` (default: a rich bar in a terminal or notebook, plain lines on stderr
    otherwise), ``"rich"``, ``"plain"`` or ``"none"`` (``False``), as ``--display``.
    ``model_args``: as ``compile``'s (``-M``), for a spec given as a path or text."""
    from auditlang.api import plan_run, start_run  # lazy: `import auditlang` stays instant
    from auditlang.core.errors import UserError  # lazy: see above
    from auditlang.store.inputs import clear_outputs, run_owner  # lazy: see above

    if model_args and hasattr(spec, "objects"):
        raise UserError("model_args= applies when the spec is compiled: pass them to auditlang.compile(...)",
                        hint="auditlang.run(auditlang.compile(SPEC, model_args=[...]), out=...) or run(SPEC_PATH, model_args=[...])")
    spec = spec if hasattr(spec, "objects") else compile(spec, model_args=model_args)
    execute = None
    if (executor or spec.settings.executor) == "ray":
        from auditlang.scaleout.rayexec import execute_on_ray, require_ray  # lazy: Ray only when asked

        require_ray()
        execute = partial(execute_on_ray, address=address, shards=ray_shards)
    # the pipeline `auditc run` takes too: access checked before planning, allowances enforced
    # while it runs and recorded in run.json (api.plan_run, api.start_run)
    rp = plan_run(spec, None if data_root is None else str(data_root), limit, engine=engine,
                  allow_hosts=allow_hosts, allow_secrets=allow_secrets)
    owner = run_owner(spec, Path(out))
    if owner is not None and not replace:
        raise UserError(f"{out} holds a run of another spec, {owner}; refusing to replace it, nothing was written",
                        hint="pass another out= folder, or replace=True to make it a run of this spec")
    if owner is not None:
        clear_outputs(Path(out))
    say = _stderr if progress not in (False, None, "none") else (lambda msg: None)
    return start_run(rp, Path(out), limit=limit, engine=engine, report=report, progress=progress, executor=execute,
                     log=say, announce=say)


def _stderr(msg: str) -> None:
    import sys  # lazy: `import auditlang` stays instant

    print(msg, file=sys.stderr, flush=True)


def open_run(run_dir: str | Path):
    """A finished run directory read back exactly as it was run (``auditc report``'s starting point)."""
    from auditlang.api import load_run  # lazy: `import auditlang` stays instant

    return load_run(run_dir)


def write_report(run_dir: str | Path, *, spec: str | Path | None = None) -> Path:
    """``auditc report``: rewrite a run directory's report from stored results (``spec``: adopt an
    edited spec that needs no new work first, ``--spec``); returns the report folder. (Not
    ``report``: that name is the ``auditlang.report`` package.)"""
    from auditlang.cli.report import report_run  # lazy: `import auditlang` stays instant

    return report_run(Path(run_dir), spec)


def view(run_dir: str | Path, *, chat_template: bool = True) -> Path:
    """``auditc view``: write a run directory's sample browser (``report/samples.html``: every
    record with its prompts as sent, follow-ups, answers, labels, confidences and errors) and
    return the page's path, to open in a browser (``chat_template=False``: messages role-tagged)."""
    from auditlang.cli.view import write_view  # lazy: `import auditlang` stays instant

    return write_view(Path(run_dir), chat_template)


def rescore(run_dir: str | Path, evaluators: list[str] | tuple[str, ...] | str) -> dict:
    """``auditc rescore``: re-score stored generations under other offline evaluators, each any
    ``[LABEL=]EXPR`` the spec language accepts (no model loaded); returns LABEL -> its per-cell
    metrics (a DataFrame; also written to ``RUN_DIR/rescore/<LABEL>/``)."""
    from auditlang.cli.rescore import rescore_run  # lazy: `import auditlang` stays instant

    return rescore_run(Path(run_dir), [evaluators] if isinstance(evaluators, str) else list(evaluators))


def diff(run_a: str | Path, run_b: str | Path, *, metrics: list[str] | tuple[str, ...] = (), resamples: int | None = None,
         seed: int | None = None, level: float | None = None, match: list[str] | tuple[str, ...] = ()):
    """``auditc diff``: B - A per shared cell and metric with paired bootstrap intervals, as a
    DataFrame (the ``--format csv`` columns; ``.attrs``: ``only_a``, ``only_b``, ``models``).
    ``run_a``/``run_b`` may be rescore folders (``RUN_DIR/rescore/LABEL``); ``match``: ``--match`` keys."""
    from auditlang.cli.diff import compare_runs  # lazy: `import auditlang` stays instant

    return compare_runs(run_a, run_b, list(metrics), resamples, seed, level, list(match)).frame()


def merge(target: str | Path, sources: list[str | Path] | tuple[str | Path, ...]):
    """``auditc merge``: merge shard run directories into ``target`` (then ``report(target)``);
    returns the ``MergeReport`` (``summary()``, counts)."""
    from auditlang.cli.merge import merge_runs  # lazy: `import auditlang` stays instant

    return merge_runs(Path(target), [Path(s) for s in sources])


def status(run_dir: str | Path):
    """``auditc status``: whether the run is live, interrupted or finished and what is left;
    a ``Status`` (``text`` as the command prints it, ``left``, ``errors``, ``complete``)."""
    from auditlang.cli.status import run_status  # lazy: `import auditlang` stays instant

    return run_status(Path(run_dir))
