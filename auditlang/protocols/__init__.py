"""Protocol programs: which requests each confidence protocol needs, and how it reads them back.

One module per family. A program never runs a model: it turns an item context into
:class:`~auditlang.core.requests.Request` objects (stage 1, known at plan time), optionally
into follow-up requests that embed stage-1 outputs (stage 2, materialised at run time), and
finally reads the results into a confidence.
"""

from auditlang.protocols.base import ItemCtx, Program  # noqa: F401
from auditlang.protocols.registry import PROGRAMS, program_for  # noqa: F401
