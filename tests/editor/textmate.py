"""A small TextMate tokenizer (the subset auditlang's grammar uses), for tests.

It follows vscode-textmate's rules: each line is scanned with the patterns of the innermost
open begin/end rule; the earliest match wins, ties go to the end pattern and then to the
pattern listed first; ``include`` of ``#name`` and ``$self``; ``captures``, ``beginCaptures``
and ``endCaptures``. Regexes run on Oniguruma (the engine VS Code uses, through
``onigurumacffi``) when it is installed, else on Python's ``re``.
"""

from __future__ import annotations

import re

try:
    import onigurumacffi as _onig
except ImportError:  # pragma: no cover - the dev extra installs it
    _onig = None


class Regex:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.py = re.compile(pattern)
        self.onig = _onig.compile(pattern) if _onig is not None else None

    def search(self, line: str, pos: int):
        if self.onig is not None:
            m = self.onig.search(line, pos)
            if m is None:
                return None
            n = self.py.groups
            return m.start(), m.end(), [m.span(i) for i in range(n + 1)]
        m = self.py.search(line, pos)
        if m is None:
            return None
        return m.start(), m.end(), [m.span(i) for i in range(m.re.groups + 1)]


def regexes(grammar: dict) -> list[str]:
    out = []

    def walk(rule):
        if isinstance(rule, dict):
            for k in ("match", "begin", "end"):
                if k in rule:
                    out.append(rule[k])
            for v in rule.values():
                walk(v)
        elif isinstance(rule, list):
            for v in rule:
                walk(v)

    walk(grammar)
    return out


class Tokenizer:
    def __init__(self, grammar: dict) -> None:
        self.g = grammar
        self._rx: dict[str, Regex] = {}

    def rx(self, p: str) -> Regex:
        if p not in self._rx:
            self._rx[p] = Regex(p)
        return self._rx[p]

    def _flatten(self, patterns: list[dict], seen=()) -> list[dict]:
        out = []
        for p in patterns:
            inc = p.get("include")
            if inc == "$self":
                out += self._flatten(self.g["patterns"], seen)
            elif inc is not None:
                name = inc.lstrip("#")
                if name in seen:
                    continue
                rule = self.g["repository"][name]
                out += self._flatten(rule["patterns"], seen + (name,)) if "patterns" in rule and \
                    "begin" not in rule and "match" not in rule else [rule]
            elif "patterns" in p and "begin" not in p and "match" not in p:
                out += self._flatten(p["patterns"], seen)
            else:
                out.append(p)
        return out

    def scopes(self, text: str) -> list[tuple[str, ...]]:
        """The scope stack of every character of ``text``."""
        out: list[tuple[str, ...]] = []
        stack: list[dict] = []  # open begin/end rules
        base = (self.g["scopeName"],)
        for line in text.splitlines(keepends=True):
            line = line if line.endswith("\n") else line + "\n"
            out += self._line(line, stack, base)
        return out[: len(text)]

    def _line(self, line: str, stack: list[dict], base: tuple[str, ...]) -> list[tuple[str, ...]]:
        cur = [()] * len(line)

        def scope_now():
            s = base
            for r in stack:
                s += tuple(x for x in (r.get("name"), r.get("contentName")) if x)
            return s

        def paint(a, b, s):
            for i in range(max(a, 0), min(b, len(line))):
                cur[i] = s

        def caps(spans, captures, s):
            for k, v in sorted(captures.items(), key=lambda kv: int(kv[0])):
                a, b = spans[int(k)]
                if a is not None and a >= 0 and "name" in v:
                    paint(a, b, s + (v["name"],))

        pos = 0
        while pos < len(line):
            rule = stack[-1] if stack else None
            pats = self._flatten(rule.get("patterns", []) if rule else self.g["patterns"])
            best = None
            if rule is not None:
                m = self.rx(rule["end"]).search(line, pos)
                if m is not None:
                    best = (m[0], -1, m, None)
            for i, p in enumerate(pats):
                m = self.rx(p.get("match") or p["begin"]).search(line, pos)
                if m is not None and (best is None or m[0] < best[0]):
                    best = (m[0], i, m, p)
            s = scope_now()
            if best is None:
                paint(pos, len(line), s)
                break
            _, _, (a, b, spans), p = best
            paint(pos, a, s)
            if p is None:  # the end of the innermost begin/end rule
                paint(a, b, s)
                caps(spans, rule.get("endCaptures", rule.get("captures", {})), s)
                stack.pop()
            elif "match" in p:
                s2 = s + ((p["name"],) if "name" in p else ())
                paint(a, b, s2)
                caps(spans, p.get("captures", {}), s2)
            else:
                s2 = s + ((p["name"],) if "name" in p else ())
                paint(a, b, s2)
                caps(spans, p.get("beginCaptures", p.get("captures", {})), s2)
                stack.append(p)
            if b == pos and p is not None and "match" in p:
                paint(pos, pos + 1, s)
                b = pos + 1  # an empty match: move on
            pos = b
        return cur
