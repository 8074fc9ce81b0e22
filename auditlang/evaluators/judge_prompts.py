"""The two LLM-judge prompts of study 002 (Xia et al., arXiv 2601.08064), appendix A.1, verbatim.

Placeholders are the paper's own: ``<question>``, ``<answer>``, ``<target>`` (correctness) and
``<question>``, ``<sampled answers >`` (grouping). Only artefacts of the paper's text rendering
are removed: the markdown heading above each prompt, the two trailing spaces that mark a hard
line break, and the code fence around the dict example. Paragraph breaks are kept as blank lines.
"""

from __future__ import annotations

CORRECTNESS_PROMPT = """You are evaluating whether an answer is semantically equivalent to the reference answer. Judge meaning rather than exact wording. Two answers should be considered equivalent if they express the same meaning, even when using different phrasing, synonyms, or slightly different names referring to the same entity.

Also, treat answers as equivalent even if they include expressions of confidence or uncertainty (e.g., 'I'm pretty sure it's X' vs. 'X'). Focus on the core meaning of the answers and ignore differences in:

- wording or phrasing
- length
- fillers
- strengtheners or weakeners

Examples:

Answer: "Mount Everest" | Reference: "Everest" → YES;

Answer: "Albert Einstein" | Reference: "Einstein" → YES;

Answer: "Paris" | Reference: "The capital of France" → YES;

Answer: "Pacific Ocean" | Reference: "Atlantic Ocean" → NO;

Answer: "Jupiter" | Reference: "I think it's Jupiter" → YES;

Answer: "Mars" | Reference: "Maybe Venus" → NO.

Answer only with:

1 if semantically equivalent;
0 otherwise.

Question: <question>

Answer: <answer>

Reference answer: <target>

Equivalent:"""

GROUPING_PROMPT = """You are grouping 10 answers by their semantic equivalence. Your goal is to judge meaning, not exact wording. Two answers should belong to one group if they are semantically equivalent, even if they use different phrasing, synonyms, or slightly different names that refer to the same entity.

Also, treat answers as equivalent even if they include expressions of confidence or uncertainty (e.g., 'I'm pretty sure it's X' vs. 'X'). Focus on the core meaning of the answers and ignore differences in:

- wording or phrasing
- length
- fillers
- strengtheners or weakeners

Examples:

- Answer: 'Mount Everest' | Reference: 'Everest' → YES
- Answer: 'Albert Einstein' | Reference: 'Einstein' → YES
- Answer: 'Paris' | Reference: 'The capital of France' → YES
- Answer: 'Pacific Ocean' | Reference: 'Atlantic Ocean' → NO
- Answer: 'Jupiter' | Reference: 'I think it's Jupiter' → YES
- Answer: 'Mars' | Reference: 'Maybe Venus' → NO

Answer in a dict format only, answers in the same group fall into one dict, for example:

{1: answer1, 2: ...}
{4: answer4, 5: ...}

Question: <question>
Answer: <sampled answers >"""
