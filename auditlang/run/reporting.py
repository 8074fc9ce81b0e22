"""`auditc report`: rebuild the report of a run directory from stored results (no model loaded)."""

from __future__ import annotations

from pathlib import Path

from auditlang.errors import UserError


def write_report(spec, plan, run_dir: Path) -> Path:
    from auditlang.report import build_report

    return build_report(spec, plan, Path(run_dir))


def load_run(run_dir: Path):
    """Recompile the run's spec and plan (deterministic) for re-scoring and reporting."""
    from auditlang.run.runner import prepare, read_run_file

    info = read_run_file(run_dir)
    if not info:
        raise UserError(f"{run_dir} is not a run directory (no run.json)", hint="run `auditc run SPEC --out DIR` first")
    spec, plan = prepare(info["spec"], info.get("data_root"), info.get("limit"))
    return spec, plan, info


def report_cmd(args) -> int:
    run_dir = Path(args.run_dir)
    spec, plan, info = load_run(run_dir)
    if not (run_dir / "records.parquet").exists():
        from auditlang.run.scoring import score_and_write

        score_and_write(spec, plan, run_dir, info.get("fingerprints", {}))
    out = write_report(spec, plan, run_dir)
    print(f"report written: {out}")
    return 0
