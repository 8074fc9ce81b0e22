"""Editor support: the ``auditc lsp`` language server (needs the ``lsp`` extra: pygls).

``server`` wires pygls; ``analysis`` (diagnostics), ``hover``, ``complete``, ``context``,
``slots``, ``symbols`` and ``docs`` hold the logic. The TextMate grammar lives in
``editors/vscode/``; setup is in docs/editors.md.
"""
