"""Protocol constructor name -> program class, and :func:`program_for`."""

from __future__ import annotations

from auditlang.protocols import consistency, probes, token, verbal
from auditlang.protocols.base import Program

PROGRAMS: dict[str, type[Program]] = {
    "token_prob": token.TokenProgram,
    "verbalized": verbal.VerbalProgram,
    "p_true": verbal.PTrueProgram,
    "self_consistency": consistency.SelfConsistencyProgram,
    "nota": probes.NotaProgram,
    "more_info": probes.MoreInfoProgram,
    "self_ref": probes.SelfRefProgram,
    "ask_cal": probes.AskCalProgram,
    "tok_prob_probe": probes.TokProbProbeProgram,
    "embedding_probe": probes.EmbeddingProgram,
    "platt": probes.PlattProgram,
}


def program_for(obj, spec) -> Program:
    """The program of one resolved protocol object. A program that wraps another protocol
    (``platt(base=...)``) gets that protocol's program built here."""
    cls = PROGRAMS[obj.ctor]
    wraps = getattr(cls, "wraps_param", None)
    if wraps:
        return cls(obj, spec, base=program_for(spec.get(getattr(obj.value, wraps)), spec))
    return cls(obj, spec)
