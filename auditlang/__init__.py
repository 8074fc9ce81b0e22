"""auditlang: a declarative language and compiler for reliability audits of language models.

The Python API mirrors the command line (docs/python.md)::

    import auditlang
    spec = auditlang.compile("audits/arc.audit")            # or the spec's text
    plan = auditlang.plan(spec, data_root="data")           # every cell and request, no model
    run = auditlang.run(spec, out="runs/arc", data_root="data")
    run.metrics, run.records, run.comparisons, run.report_dir
    again = auditlang.open_run("runs/arc")                  # a finished run, exactly as it ran
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from auditlang.core.version import __version__

__all__ = ["CompileError", "__version__", "compile", "open_run", "plan", "run"]


def __getattr__(name: str):
    """``auditlang.CompileError`` (what ``compile``, ``plan`` and ``run`` raise for a spec
    problem), imported on first use so `import auditlang` stays instant."""
    if name == "CompileError":
        from auditlang.core.diagnostics import CompileError  # lazy: `import auditlang` stays instant

        return CompileError
    raise AttributeError(f"module 'auditlang' has no attribute {name!r}")


def compile(source: str | Path, *, path: str | Path | None = None):  # noqa: A001  (mirrors `auditc check`)
    """A validated ``Spec`` from a spec file or a spec's text. Text is compiled as if it were the
    file ``path`` (default ``./<spec>.audit``: relative imports and data paths resolve from there).
    Raises ``CompileError`` (its ``.diagnostics`` carry file:line:col and hints)."""
    from auditlang.plan.planner import check_capabilities  # lazy: `import auditlang` stays instant
    from auditlang.resolve import compile_source  # lazy: `import auditlang` stays instant

    spec = compile_source(source, path)
    check_capabilities(spec).raise_if_errors()  # what `auditc check` adds to the resolver (E172)
    return spec


def plan(spec: Any, *, data_root: str | Path | None = None, limit: int | None = None):
    """The ``Plan`` of a spec (a ``Spec``, a path or spec text): cells, unique requests, counts.
    (Once any ``auditlang.plan`` submodule is imported, this name is the callable package, which
    does the same.)"""
    from auditlang.plan import build  # lazy: `import auditlang` stays instant

    return build(spec, data_root, limit)


def run(spec: Any, *, out: str | Path, data_root: str | Path | None = None, limit: int | None = None,
        engine: str | None = None, report: bool = True, progress: bool = False, executor: str | None = None,
        address: str | None = None, ray_shards: int | None = None,
        allow_hosts: list[str] | tuple[str, ...] = (), allow_secrets: list[str] | tuple[str, ...] = (),
        replace: bool = False):
    """Plan, execute (resumable), score and report a spec into the run directory ``out``; returns a
    ``Run`` with ``records``, ``metrics``, ``comparisons`` and ``report_dir``. ``engine`` overrides
    every model's engine (``"dryrun"`` runs no model). ``executor="ray"`` (default: the spec's
    ``settings executor``) runs on the Ray cluster at ``address`` in ``ray_shards`` item shards per
    model, reusing a Ray session already open in this process (docs/scale-out.md). As with
    ``auditc run``, a model may contact a non-loopback host or read an environment variable only
    when ``allow_hosts`` / ``allow_secrets`` (or the user config file) allow it (docs/security.md);
    otherwise ``CompileError`` (E180/E181). An ``out`` holding a run of another spec file is refused
    (``UserError``) unless ``replace=True`` (``auditc run --replace``)."""
    from auditlang.api import plan_run, start_run  # lazy: `import auditlang` stays instant
    from auditlang.core.errors import UserError  # lazy: see above
    from auditlang.store.inputs import clear_outputs, run_owner  # lazy: see above

    spec = spec if hasattr(spec, "objects") else compile(spec)
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
    return start_run(rp, Path(out), limit=limit, engine=engine, report=report, progress=progress, executor=execute)


def open_run(run_dir: str | Path):
    """A finished run directory read back exactly as it was run (``auditc report``'s starting point)."""
    from auditlang.api import load_run  # lazy: `import auditlang` stays instant

    return load_run(run_dir)
