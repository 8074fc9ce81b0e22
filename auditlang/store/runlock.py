"""Who is using a run directory right now: an exclusive ``flock`` plus a heartbeat file.

``auditc run`` holds ``RUN_DIR/run.lock`` (``fcntl.flock``, released by the OS when the process
dies, ``kill -9`` included) and writes what it is doing into ``RUN_DIR/heartbeat.json``.
``auditc status`` probes the lock without waiting: held means a run is live; free with a
heartbeat whose state is not ``finished`` means the last run was interrupted.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from pathlib import Path
from typing import Any

from auditlang.core.errors import UserError
from auditlang.store.rundir import HEARTBEAT_FILE, LOCK_FILE, write_json_atomic


try:  # POSIX; on other systems the lock is advisory only (status cannot tell live runs)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class RunLock:
    """Context manager held by ``auditc run``; ``beat(**state)`` records the current phase."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._fh = None
        self.state: dict[str, Any] = {}

    def __enter__(self) -> "RunLock":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = self.run_dir / LOCK_FILE
        try:
            self._fh = open(lock, "a+")
        except OSError as e:  # run.lock replaced by a folder, or not writable
            raise UserError(f"cannot open the run lock {lock}: {e.strerror}",
                            hint=f"{LOCK_FILE} must be a writable file; remove what is there (no `auditc run` "
                                 "is using the folder without it), or pass another --out") from None
        if fcntl is not None:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = read_heartbeat(self.run_dir)
                self._fh.close()
                self._fh = None
                raise UserError(f"{self.run_dir} is in use by another `auditc run` (pid {other.get('pid', '?')} on "
                                f"{other.get('host', '?')}, since {other.get('started', '?')})",
                                hint="wait for it to finish, or pass another --out") from None
        self.state = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now(), "state": "starting"}
        try:
            self._write()
        except OSError as e:
            self._fh.close()
            self._fh = None
            raise UserError(f"cannot write {self.run_dir / HEARTBEAT_FILE}: {e.strerror}",
                            hint=f"{HEARTBEAT_FILE} must be a writable file; remove what is there, or pass another --out") from None
        return self

    def beat(self, **state: Any) -> None:
        self.state.update(state, updated=_now())
        self._write()

    def _write(self) -> None:
        write_json_atomic(self.run_dir / HEARTBEAT_FILE, self.state, indent=1)

    def __exit__(self, exc_type, exc, tb) -> None:
        self.state["state"] = "finished" if exc_type is None else ("interrupted" if exc_type is KeyboardInterrupt else "failed")
        if exc is not None:
            self.state["error"] = f"{exc_type.__name__}: {exc}"[:500]
        self.state["ended"] = _now()
        self._write()
        if self._fh is not None:
            if fcntl is not None:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def read_heartbeat(run_dir: Path) -> dict[str, Any]:
    p = Path(run_dir) / HEARTBEAT_FILE
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def is_live(run_dir: Path) -> bool:
    """Whether a process holds the run directory's lock right now (never waits)."""
    p = Path(run_dir) / LOCK_FILE
    if fcntl is None or not p.is_file():
        return False
    with open(p, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False
