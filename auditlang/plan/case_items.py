"""Plan-time check of ``case_study`` cases that name an item id (E156; W156 for an item of the data
that ``--limit`` may have cut):
the id must be one of the dataset's sampled items, which only the loaded data knows, so
``auditc check`` cannot say it and ``auditc plan`` / ``auditc run`` say it before any model runs."""

from __future__ import annotations

from auditlang.core.diagnostics import DiagnosticBag, did_you_mean
from auditlang.data.loader import DatasetItems
from auditlang.resolve.spec import Spec


def check_case_items(spec: Spec, data: dict[str, DatasetItems | None], bag: DiagnosticBag, limited: bool) -> None:
    """One diagnostic per case whose item is not in its dataset's sample: an error, or a warning
    when ``--limit`` cut the sample and the item is in the data (it may be among the items cut)."""
    for comp in spec.of_kind("compare").values():
        if comp.ctor != "case_study":
            continue
        for case in comp.value.cases:
            if len(case) != 3 or case[2] == "first" or data.get(case[1]) is None:
                continue
            ds = data[case[1]]
            ids = [str(ds.items[i]["id"]) for i in ds.indices]
            if case[2] in ids:
                continue
            in_data = any(str(it["id"]) == case[2] for it in ds.items)
            where = ("is in the data but not in the sample" if in_data else "is not in the data") + \
                    f" of dataset '{case[1]}' ({len(ids)} sampled item(s){', cut by --limit' if limited else ''})"
            msg = f"compare '{comp.id}': case [{', '.join(case)}]: item '{case[2]}' {where}"
            hint = did_you_mean(case[2], ids, "sampled ids") or 'write "first" for the first sampled item'
            if limited and in_data:
                bag.warning("W156", msg, comp.param_span("cases"), hint=hint)
            else:
                bag.error("E156", msg, comp.param_span("cases"), hint=hint)
