"""Planning: a Spec and its data -> the Plan (cells, units, deduplicated stage-1 requests), and the
follow-up (``stage2.py``) and cross-stage (``crossdata.py``) requests built from stored outputs.

The package is also the Python API's ``auditlang.plan(spec, data_root=None, limit=None)``:
importing a submodule binds ``auditlang.plan`` to this package, so the package is callable.
"""

import sys
import types


def build(spec, data_root=None, limit=None):
    """The ``Plan`` of a spec (a ``Spec``, a spec file or spec text), as ``auditc plan`` shows it:
    datasets that are not available are estimated from their declared sizes (``plan.estimated``)."""
    from auditlang.plan.planner import Planner  # lazy: plan.model users need no planner
    from auditlang.resolve import compile_source  # lazy: see above

    spec = spec if hasattr(spec, "objects") else compile_source(spec)
    return Planner(spec, None if data_root is None else str(data_root), load_data=True, limit=limit).build()


class _CallablePackage(types.ModuleType):
    def __call__(self, spec, *, data_root=None, limit=None):
        return build(spec, data_root, limit)


sys.modules[__name__].__class__ = _CallablePackage
