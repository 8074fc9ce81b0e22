"""The language server's stdio framing, robust to a client that sends garbage (docs/editors.md).

pygls reads ``Content-Length: N`` headers and then exactly N bytes. A header that is not a
number left its reader out of step with the stream, so every later message was lost; a length of
10^12 made it try to read (and allocate) that much and stop answering. Here a header that is not
a number, or a length above :data:`MAX_BODY`, is logged to stderr and the stream is skipped up to
the next ``Content-Length:`` header: the server keeps answering the messages after it. Stray
bytes before a header (one byte too many on stdin, or a body shorter than its length, whose rest
then runs into the next header) are skipped the same way: the header is found anywhere in a line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import threading

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdinAsyncReader, StdoutWriter

MAX_BODY = 256 * 1024 * 1024  # bytes of one message (a 10 MB document is ~10 MB of JSON)
_HEADER = b"content-length:"
_LENGTH = re.compile(rb"\s*(\d{1,12})\s*")

log = logging.getLogger("auditlang.lsp")


async def read_messages(server, reader, stop: threading.Event) -> None:
    """Read framed JSON-RPC messages from ``reader`` and hand them to ``server.protocol``."""
    length: int | None = None
    skipping = False  # after a bad header: look for the next Content-Length, wherever it starts
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            break
        low = line.lower()
        at = low.find(_HEADER)
        if skipping and at < 0:
            continue
        if at > 0:  # stray bytes (or the tail of a body that was too short) before a header: resync there
            print(f"auditlang lsp: skipping {at} stray byte(s) before a Content-Length header", file=sys.stderr)
            line, low, length = line[at:], low[at:], None
        skipping = False
        if low.startswith(_HEADER):
            m = _LENGTH.fullmatch(line[len(_HEADER):])
            n = int(m.group(1)) if m else None
            if n is None or n > MAX_BODY:
                print(f"auditlang lsp: ignoring a message with Content-Length {line[len(_HEADER):].strip()[:40]!r} "
                      f"(not a number of bytes up to {MAX_BODY}); skipping to the next message", file=sys.stderr)
                length, skipping = None, True
                continue
            length = n
            continue
        if line.strip():
            continue  # another header (Content-Type)
        if length is None:
            continue  # a blank line outside a message
        body = await reader.readexactly(length) if length else b""
        length = None
        if not body:
            continue
        try:
            message = json.loads(body, object_hook=server.protocol.structure_message)
            server.protocol.handle_message(message)
        except Exception as exc:  # noqa: BLE001 - one bad message must not end the session
            log.exception("unable to handle a message")
            server.report_server_error(exc, JsonRpcException)


def serve_stdio(server) -> None:
    """pygls' ``start_io`` with :func:`read_messages` as the reader loop."""
    stop = threading.Event()
    server._stop_event = stop  # pygls' shutdown/exit handlers set it
    reader = StdinAsyncReader(sys.stdin.buffer, server.thread_pool)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    try:
        asyncio.run(read_messages(server, reader, stop))
    except BrokenPipeError:
        log.error("connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
