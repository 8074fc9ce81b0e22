"""`auditc lsp`: the language server for editors (stdio; docs/editors.md)."""

from __future__ import annotations

import argparse

from auditlang.core.errors import RuntimeFailure


def cmd_lsp(args: argparse.Namespace) -> int:
    try:
        from auditlang.lsp.server import serve  # lazy: pygls is an optional extra
    except ImportError as e:
        raise RuntimeFailure(f"the language server needs pygls ({e})",
                             hint="pip install 'auditlang[lsp]'") from None
    serve()
    return 0
