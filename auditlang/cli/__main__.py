"""``python -m auditlang.cli``: the same as the ``auditc`` command.

``python -m`` puts the working directory first on the import path; a folder holding a stranger's
spec may also hold a module and a ``*.dist-info`` that registers it as an ``auditlang.plugins``
entry point. The ``auditc`` script does not search the working directory, so neither does this
entry point: the implicit entry is dropped before anything looks up a plugin (docs/security.md).
auditlang's own modules are found through the package already imported, wherever it lives.
"""

import os
import sys

if sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.getcwd()):
    del sys.path[0]

from auditlang.cli import entry  # noqa: E402  (after the import path is fixed)

entry()
