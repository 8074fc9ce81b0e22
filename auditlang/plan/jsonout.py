"""`auditc plan --format json` with every request, from a lean plan: the requests are spooled to
temporary files as the planner finds them (``sink``) and spliced into the document, which is
written in pieces; its text and hash equal ``json.dumps(plan.to_dict())`` of the full plan."""

from __future__ import annotations

import hashlib
import json
import tempfile
from typing import IO, Any

from auditlang.core.requests import Request, canonical_json
from auditlang.plan.model import Plan, plan_body

_SLOT = "\x00requests\x00"  # stands for the request list; JSON escapes it, so no other text matches


class RequestSpool:
    """The planner's ``sink``: each request's JSON (as the document shows it) and its canonical
    JSON (as the plan hash reads it), one per line in two temporary files."""

    def __init__(self) -> None:
        self.shown = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.canon = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.count = 0

    def __call__(self, r: Request) -> None:
        d = r.to_dict()
        self.shown.write(json.dumps(d, ensure_ascii=False) + "\n")
        self.canon.write(canonical_json(d) + "\n")
        self.count += 1

    def _lines(self, fh) -> Any:
        fh.seek(0)
        for line in fh:
            yield line.rstrip("\n")

    def close(self) -> None:
        self.shown.close()
        self.canon.close()


def write_plan_json(plan: Plan, spool: RequestSpool, out: IO[str], indent: int | None, extra: dict[str, Any]) -> None:
    """Write the plan with its spooled requests; ``extra`` keys are added after ``hash`` (not hashed)."""
    d = plan.to_dict(include_requests=False)
    d.pop("hash")
    d["requests"] = _SLOT
    # the hash of the document with its requests: canonical JSON around the spooled canonical lines
    head, tail = canonical_json(plan_body(d)).split(canonical_json(_SLOT))
    h = hashlib.sha256(head.encode("utf-8"))
    h.update(b"[")
    for i, line in enumerate(spool._lines(spool.canon)):
        h.update((("," if i else "") + line).encode("utf-8"))
    h.update(("]" + tail).encode("utf-8"))
    d["hash"] = h.hexdigest()[:16]
    d.update(extra)
    before, after = json.dumps(d, indent=indent, ensure_ascii=False).split(json.dumps(_SLOT))
    out.write(before)
    if not spool.count:
        out.write("[]")
    elif indent is None:
        out.write("[" + ", ".join(spool._lines(spool.shown)) + "]")
    else:
        pad = " " * (2 * indent)  # the list is a top-level value: its items sit two levels deep
        out.write("[")
        for i, line in enumerate(spool._lines(spool.shown)):
            item = json.dumps(json.loads(line), indent=indent, ensure_ascii=False).replace("\n", "\n" + pad)
            out.write(("," if i else "") + "\n" + pad + item)
        out.write("\n" + " " * indent + "]")
    out.write(after)
