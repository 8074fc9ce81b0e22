"""`auditc view RUN_DIR`: write the run's sample browser (report/samples.html) and open or serve it.

The page lists every cell x item of ``records.parquet`` with the prompts each request sent (chat
templates applied with the model's local tokenizer where there is one, as `auditc show` renders
them), every follow-up, the raw answers, parsed labels, confidences, correctness, parse failures
and errors (auditlang/report/samples.py). ``--serve`` serves the report folder on 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import signal
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Any

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK, say
from auditlang.cli.show import local_tokenizer
from auditlang.core.errors import UsageError
from auditlang.core.requests import Prompt
from auditlang.report.samples import PAGE_FILE, write_samples
from auditlang.score.stage import score_and_write
from auditlang.store.integrity import stale_outputs
from auditlang.store.rundir import RECORDS


def cmd_view(args) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: expected 0..65535")
    page = write_view(Path(args.run_dir), chat_template=not args.no_chat_template,
                      note=lambda msg: print(msg, file=sys.stderr))
    say(f"samples written: {page}")
    if args.serve:
        return serve(page.parent, args.port, args.open)
    if args.open:
        webbrowser.open(page.resolve().as_uri())
    else:
        say(f"open {page.resolve().as_uri()} in a browser (or `auditc view {args.run_dir} --serve`)")
    return EXIT_OK


def write_view(run_dir: Path, chat_template: bool = True, note=None) -> Path:
    """Write ``run_dir``'s sample browser (``report/samples.html`` and its data file), scoring
    the run first when its records are missing or stale; returns the page (``auditlang.view``)."""
    run = load_run(Path(run_dir))
    with run.stdlib():
        if not (run.run_dir / RECORDS).exists() or stale_outputs(run.run_dir, run.info)[0]:
            if note is not None:
                note(f"note: {RECORDS} is missing or no longer matches the journal; scored again")
            score_and_write(run.spec, run.plan, run.run_dir, run.fingerprints)
        render = ChatRenderer(run.spec) if chat_template else _untemplated
        page, _ = write_samples(run.run_dir, run.fingerprints, render, title=f"Samples: {run.spec.entry.name}")
    return page


class ChatRenderer:
    """(model, chat Prompt) -> (the text the model's chat template makes of it, how), with each
    model's local tokenizer read once (no weights); (None, why) where there is none."""

    def __init__(self, spec) -> None:
        self.spec = spec
        self.toks: dict[str, tuple[Any, str, dict]] = {}

    def __call__(self, model: str, prompt: Prompt) -> tuple[str | None, str]:
        if model not in self.toks:
            try:
                self.toks[model] = local_tokenizer(self.spec, model)
            except Exception as e:  # noqa: BLE001  (a model the stored spec cannot configure: messages shown, said so)
                self.toks[model] = (None, f"no tokenizer ({type(e).__name__})", {})
        tok, source, kwargs = self.toks[model]
        if tok is None:
            return None, source
        if not getattr(tok, "chat_template", None):
            return None, f"{source} has no chat template"
        from auditlang.engines.params import apply_chat  # lazy: engine modules only when a tokenizer was found

        msgs = [{"role": m.role, "content": m.content} for m in prompt.messages or ()]
        how = "continuing the assistant message" if prompt.continue_final else "with the generation prompt"
        return apply_chat(tok, msgs, prompt.continue_final, kwargs), f"chat template applied {how}: {source}"


def _untemplated(model: str, prompt: Prompt) -> tuple[None, str]:
    return None, "--no-chat-template"


def serve(folder: Path, port: int, open_browser: bool) -> int:
    """Serve ``folder`` on 127.0.0.1 until Ctrl-C or SIGTERM (only this machine can reach it)."""
    _stop_on_signals()
    handler = functools.partial(_Quiet, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as e:  # the port is taken, or one this user may not bind
        raise UsageError(f"--port {port}: cannot serve on 127.0.0.1:{port} ({e.strerror or e})",
                         hint="--port 0 picks a free port; or stop what is listening there") from None
    with server as httpd:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/{PAGE_FILE}"
        print(f"serving {folder} at {url} (Ctrl-C stops)", flush=True)
        if open_browser:
            webbrowser.open(url)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return EXIT_OK


def _stop_on_signals() -> None:
    """Ctrl-C (SIGINT) and SIGTERM stop the server, also where SIGINT came ignored from the parent
    (a process started in the background by a non-interactive shell): Python then installs no
    KeyboardInterrupt handler of its own, and the server would run until killed."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, stop)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        pass
