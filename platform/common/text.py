"""Text that people see must read as it is stored: no bidirectional or invisible formatting
characters (a run label "txt.exe" must not show as "exe.txt")."""

from __future__ import annotations

import unicodedata

# Explicit directional formatting (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI) and marks (LRM, RLM, ALM).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def invisible(ch: str) -> bool:
    """Formatting and control characters: bidi overrides, zero-width joiners and spaces, ..."""
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cf", "Cc", "Co", "Cs", "Cn")


def neutralize(text: str) -> str:
    """`text` without invisible and bidirectional formatting characters."""
    return "".join(ch for ch in text if not invisible(ch))
