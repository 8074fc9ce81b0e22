"""The editor features never raise, wherever the cursor is and however much of a spec is typed
(an exception would reach the editor as a JSON-RPC error instead of a hover or completion)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("lsprotocol")

from auditlang.lsp.analysis import check_text  # noqa: E402
from auditlang.lsp.complete import complete  # noqa: E402
from auditlang.lsp.hover import definition, hover  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FILES = sorted([*REPO.glob("specs/*.audit"), *REPO.glob("stdlib/*.audit"), *REPO.glob("examples/*.audit")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_features_at_random_offsets_and_prefixes(path):
    text = path.read_text(encoding="utf-8")
    assert check_text(text, path) == []  # the repository's specs compile cleanly as typed buffers too
    rnd = random.Random(path.name)
    for i, o in enumerate(sorted(rnd.sample(range(len(text) + 1), min(30, len(text) + 1)))):
        complete(text, o, path)
        hover(text, o, path)
        definition(text, o, path)
        complete(text[:o], o, path)  # the document as typed up to here
        if i % 6 == 0:
            assert all(d.line <= d.end_line for d in check_text(text[:o], path))
