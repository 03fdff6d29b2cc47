"""Usernames that must not pass for others: no bidirectional or invisible formatting characters
(common.text), and none that looks like an existing one.

Two names look alike when their skeletons are equal: each character, after NFKC normalization (and
case folding), replaced by one representative of its class of homoglyphs (the Unicode confusables
data that `confusable_homoglyphs` ships: Cyrillic "а" and Latin "a", "l", "I" and "1", ...)."""

from __future__ import annotations

import unicodedata
from functools import cache, lru_cache

from confusable_homoglyphs import confusables
from confusable_homoglyphs.utils import load

from common.text import invisible


@cache
def _representatives() -> dict[str, str]:
    """Each confusable character -> the smallest character of its class of homoglyphs."""
    parent: dict[str, str] = {}

    def find(c: str) -> str:
        while parent.setdefault(c, c) != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for ch, glyphs in load("confusables.json").items():
        for glyph in glyphs:
            other = glyph["c"].strip("\u200e")
            if len(ch) == 1 and len(other) == 1:
                a, b = find(ch), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {c: find(c) for c in parent}


@lru_cache(maxsize=100_000)
def skeletons(name: str) -> tuple[str, str, str]:
    """What `name` looks like, three ways: case folded then homoglyphs replaced ("ALICE" as "alice"),
    homoglyphs replaced first ("aIice", with a capital i, as "alice"), and the same from capitals
    ("b0b" as "bob"). Names a reader cannot tell apart share one of them."""
    reps = _representatives()

    def glyphs(text: str) -> str:
        return "".join(reps.get(ch, ch) for ch in text if not invisible(ch))

    normal = unicodedata.normalize("NFKC", name)
    return (
        glyphs(normal.casefold()),
        glyphs(glyphs(normal).casefold()),
        glyphs(glyphs(normal.upper()).casefold()),
    )


def username_problem(username: str, existing) -> str | None:
    """Why `username` may not be registered, or None. `existing`: the usernames already taken."""
    if any(invisible(ch) for ch in username):
        return "Usernames cannot contain invisible or right-to-left formatting characters."
    if confusables.is_dangerous(username):
        return "This username mixes scripts whose letters look alike (e.g. Cyrillic and Latin); use one script."
    mine = skeletons(username)
    for other in existing:
        if any(a == b for a, b in zip(mine, skeletons(other))):
            return "This username looks too much like an existing one; choose another."
    return None
