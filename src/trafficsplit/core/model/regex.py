"""Match-rule regular expressions: RE2, with a program-size limit.

Python's `re` backtracks: one rule like `(a+)+$` and a 29-byte header held the processor's event loop for ~9 s. RE2
matches in time linear in the input, and its program size (checked against MAX_REGEX_PROGRAM, Envoy's own default)
bounds the cost per byte. RE2 syntax is what Envoy's safe_regex, Gateway API and the CRD's CEL `matches()` use;
what only backtracking engines support (backreferences, lookaround) is refused with RE2's own message.
"""

from __future__ import annotations

from typing import Any

import re2

from trafficsplit.core.model.limits import MAX_MATCH_VALUE, MAX_REGEX_PROGRAM

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is a returned problem, not a line on stderr
_OPTIONS.never_capture = True  # rules only ask "does it match": no groups to record


class RegexError(ValueError):
    pass


class Pattern:
    """A compiled RE2 pattern; `fullmatch` is the only operation match rules need.

    Compiled and matched as UTF-8 bytes: the binding's str path maps every match back to character offsets, which
    costs several times the match itself (bench/bench_core.py "regex")."""

    __slots__ = ("_compiled", "pattern")
    engine = "re2"

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_MATCH_VALUE:
            raise RegexError(f"{len(pattern)} characters, at most {MAX_MATCH_VALUE} are allowed")
        try:
            compiled: Any = re2.compile(pattern.encode(), _OPTIONS)
        except UnicodeEncodeError:
            raise RegexError("not an RE2 regular expression: not valid UTF-8") from None
        except re2.error as exc:
            raise RegexError(f"not an RE2 regular expression: {_reason(exc)}") from None
        if compiled.programsize > MAX_REGEX_PROGRAM:
            raise RegexError(
                f"RE2 program size {compiled.programsize} is over the limit of {MAX_REGEX_PROGRAM}; simplify it "
                "(large counted repetitions such as {1,1000} are the usual cause)"
            )
        self.pattern = pattern
        self._compiled = compiled

    def fullmatch(self, value: str) -> bool:
        # surrogatepass: a value can never make the match raise (request headers are decoded with "replace" anyway).
        return self._compiled.fullmatch(value.encode("utf-8", "surrogatepass")) is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


def _reason(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
