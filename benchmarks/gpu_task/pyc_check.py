"""Which of the modules a vLLM engine start imports run without cached bytecode (issue 36, session 21).

Imports what ``VLLMEngine.__init__`` imports before ``LLM()`` (vllm, its platform, transformers'
tokenizer classes, vLLM's ``LLM`` entrypoint), then counts per ``sys.path`` entry the loaded
``.py`` modules and those with no ``__pycache__`` file (``importlib.util.cache_from_source``):
those are compiled from source by every process that imports them.

    python benchmarks/gpu_task/pyc_check.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter


def main() -> int:
    import vllm
    from vllm.platforms import current_platform

    current_platform.is_cpu()
    from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401

    vllm.LLM  # noqa: B018 - the lazy entrypoint import
    total: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    roots = sorted((p for p in sys.path if p), key=len, reverse=True)
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        root = next((r for r in roots if f.startswith(r)), "?")
        total[root] += 1
        if not os.path.exists(importlib.util.cache_from_source(f)):
            missing[root] += 1
    print(f"dont_write_bytecode={sys.flags.dont_write_bytecode} PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE')!r} pycache_prefix={sys.pycache_prefix!r}")
    for root, n in total.most_common():
        print(f"pyc {root}: {n} modules, {missing[root]} without cached bytecode, writable={os.access(root, os.W_OK)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
