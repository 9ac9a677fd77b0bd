"""CheckNumbers: refuse a number literal regorus would hold otherwise than OPA, which keeps its text.

An integer beyond 64 bits that a double cannot hold (123456789012345678901234567890
becomes 1.2345678901234568e+29), a fraction whose double reads back otherwise
(0.10000000000000000001 becomes 0.1), an integral double that is not the number
written (1e23 becomes 99999999999999991611392). One a double holds
(gatekeeper-library's 1000000000000000000000) loads.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from regokite.engine.extensions.arithmetic import exact_value
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, refusal
from regokite.engine.rewrite.tree import tagged

_INTEGER = re.compile(rb"-?[0-9]+")


def check(target: Target) -> list[Change]:
    """No change: raises PolicyLoadError at the first number regorus would round."""
    parsed = target.parsed()
    if parsed is None:
        return []
    source, module = parsed.source, target.module
    for kind, node in tagged(parsed.tree):
        if kind != "Number":
            continue
        text = source[node["span"]["start"] : node["span"]["end"]]
        if _INTEGER.fullmatch(text):
            if not -(2**63) <= int(text) < 2**64 and int(float(text)) != int(text):
                raise refusal(
                    module,
                    source,
                    node["span"]["start"],
                    f"the integer {text.decode()} is beyond 64 bits and not a double, which the embedded engine "
                    "would round: write it as a string, or use --engine opa",
                )
        elif _held_otherwise(text):
            raise refusal(
                module,
                source,
                node["span"]["start"],
                f"the number {text.decode()} is not held exactly by the embedded engine's 64-bit double "
                f"(it would read as {_as_held(float(text))}): write fewer digits, or use --engine opa",
            )
    return []


def _as_held(double: float) -> str:
    return str(int(double)) if double.is_integer() else repr(double)


def _held_otherwise(text: bytes) -> bool:
    try:
        written, double = Fraction(text.decode().replace("_", "")), float(text)
    except (ValueError, OverflowError):
        return False  # regorus's own error at load
    if not math.isfinite(double):
        return False
    return written != exact_value(double)
