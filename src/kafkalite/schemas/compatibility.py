"""Compatibility levels as Confluent defines them: which earlier versions a new schema is checked
against (the latest, or all for *_TRANSITIVE) and in which direction (BACKWARD, FORWARD, FULL).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkalite.schemas.model import Incompatibility, ParsedSchema

BACKWARD = "BACKWARD"
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = BACKWARD


def check(
    level: str, new: ParsedSchema, previous: Sequence[tuple[int, ParsedSchema]]
) -> list[tuple[int, list[Incompatibility]]]:
    """The earlier versions (oldest first in `previous`) `new` is incompatible with, and why.

    BACKWARD: a reader of the new schema reads data of the old one; FORWARD: the other way;
    FULL: both. Non-transitive levels look at the latest version only."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    failures: list[tuple[int, list[Incompatibility]]] = []
    for version, old in reversed(against):
        reasons: list[Incompatibility] = []
        if base in ("BACKWARD", "FULL"):
            reasons += new.can_read(old)
        if base in ("FORWARD", "FULL"):
            reasons += old.can_read(new)
        if reasons:
            failures.append((version, reasons))
    return failures


def describe(
    level: str, failures: list[tuple[int, list[Incompatibility]]], old_texts: dict[int, str]
) -> list[str]:
    """Confluent's verbose messages: each reason, then the old version, its text and the level."""
    out: list[str] = []
    for version, reasons in failures:
        out += [r.render() for r in reasons]
        out.append(f"{{oldSchemaVersion: {version}}}")
        out.append(f"{{oldSchema: '{old_texts.get(version, '')}'}}")
        out.append(f"{{compatibility: '{level}'}}")
    return out
