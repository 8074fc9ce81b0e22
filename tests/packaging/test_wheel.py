"""The built wheel carries the stdlib (as ``auditlang/_stdlib``) and the resolver finds it there."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from auditlang import stdlib_location
from auditlang.core.diagnostics import DiagnosticBag
from auditlang.resolve.modules import load_modules

REPO = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_package_list_matches_the_source_tree() -> None:
    cfg = _pyproject()["tool"]["setuptools"]
    listed = set(cfg["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "auditlang").rglob("__init__.py")}
    assert listed - {"auditlang._stdlib"} == on_disk, (
        "pyproject.toml [tool.setuptools] packages is out of date: add/remove "
        f"{sorted(on_disk ^ (listed - {'auditlang._stdlib'}))}")
    assert cfg["package-dir"] == {"auditlang._stdlib": "stdlib"}


def _write_importing_spec(folder: Path) -> Path:
    spec = folder / "s.audit"
    spec.write_text('import "stdlib/metrics"\n', encoding="utf-8")
    return spec


def test_resolver_uses_the_installed_copy_without_the_repo_layout(tmp_path: Path, monkeypatch) -> None:
    installed = tmp_path / "site" / "auditlang" / "_stdlib"
    shutil.copytree(REPO / "stdlib", installed)
    monkeypatch.setattr(stdlib_location, "REPO_STDLIB", tmp_path / "no-repo" / "stdlib")
    monkeypatch.setattr(stdlib_location, "INSTALLED_STDLIB", installed)
    top, hashes = load_modules(_write_importing_spec(tmp_path), DiagnosticBag())
    assert top.imports["metrics"].path == (installed / "metrics.audit").resolve()
    assert top.imports["metrics"].key == "metrics"
    assert str((installed / "metrics.audit").resolve()) in hashes


def test_repo_layout_wins_over_the_installed_copy(tmp_path: Path, monkeypatch) -> None:
    installed = tmp_path / "_stdlib"
    shutil.copytree(REPO / "stdlib", installed)
    monkeypatch.setattr(stdlib_location, "INSTALLED_STDLIB", installed)
    assert stdlib_location.stdlib_root() == REPO / "stdlib"


def test_missing_stdlib_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(stdlib_location, "REPO_STDLIB", tmp_path / "a")
    monkeypatch.setattr(stdlib_location, "INSTALLED_STDLIB", tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="reinstall auditlang"):
        stdlib_location.stdlib_root()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed in this environment")
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("auditlang", "stdlib"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: build with this environment's setuptools (CI has no index access);
    # -v: the build backend's own output (its deprecation warnings) is kept in build.log
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "-v", "-w", str(out)], capture_output=True, text=True, cwd=src)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (out / "build.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    (whl,) = out.glob("auditlang-*.whl")
    return whl


def test_license_is_an_spdx_expression_and_the_build_warns_nothing(wheel: Path) -> None:
    """`project.license` as an SPDX string (a TOML table is deprecated by setuptools >= 77, which
    warned three times per install that builds fail from 2027-Feb-18)."""
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in _pyproject()["build-system"]["requires"])
    log = (wheel.parent / "build.log").read_text(encoding="utf-8")
    assert "Deprecat" not in log and "2027" not in log, log[-3000:]
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(meta).decode()


def test_wheel_contains_every_stdlib_file_and_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    stdlib_files = [p for p in (REPO / "stdlib").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert stdlib_files
    missing = [p.relative_to(REPO).as_posix() for p in stdlib_files
               if "auditlang/_stdlib/" + p.relative_to(REPO / "stdlib").as_posix() not in names]
    assert not missing, f"stdlib files missing from the wheel: {missing}"
    modules = [p.relative_to(REPO).as_posix() for p in (REPO / "auditlang").rglob("*.py")]
    assert not [m for m in modules if m not in names]
    assert "auditlang/syntax/audit.lark" in names


def test_installed_wheel_resolves_stdlib_imports_and_templates(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    _write_importing_spec(tmp_path)
    code = (
        "import sys, auditlang\n"
        "from pathlib import Path\n"
        "from auditlang.core.diagnostics import DiagnosticBag\n"
        "from auditlang.resolve.modules import load_modules\n"
        "from auditlang.prompts import compile_stdlib_template, list_stdlib_templates\n"
        "top, _ = load_modules(Path('s.audit'), DiagnosticBag())\n"
        "print(auditlang.__file__)\n"
        "print(top.imports['metrics'].path)\n"
        "print(len(list_stdlib_templates()), compile_stdlib_template('s004/mc/tokprob').name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pkg_file, metrics_path, templates = proc.stdout.splitlines()
    assert Path(pkg_file).is_relative_to(site), "the test must import the unpacked wheel, not the repo"
    assert Path(metrics_path) == (site / "auditlang" / "_stdlib" / "metrics.audit").resolve()
    n_templates, name = templates.split()
    assert int(n_templates) == len(list((REPO / "stdlib" / "templates").rglob("*.j2")))
    assert name == "s004/mc/tokprob"
