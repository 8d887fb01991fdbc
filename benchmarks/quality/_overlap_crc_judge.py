"""The one deterministic judge both engines get in benchmarks/quality/port_agreement.py
(stdlib only, so the port's virtualenv can import it too).

A candidate's score depends on the question and the candidate's own title and text, never on
the context: 0.9 x the share of the question's words found in the candidate, plus 0.1 x its
CRC-32 as a fraction, so equal overlaps rarely tie.
"""

from __future__ import annotations

import re
import zlib

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> set[str]:
    """The casefolded words of a text (runs of letters and digits)."""
    return set(_WORD.findall(text.casefold()))


def overlap_crc_score(question: str, title: str, text: str) -> float:
    """The judge's yes-probability for one candidate, in [0, 1)."""
    asked = words(question)
    found = words(f"{title}\n{text}")
    overlap = len(asked & found) / len(asked) if asked else 0.0
    crc = zlib.crc32(f"{title}\n{text}".encode()) / 2**32
    return 0.9 * overlap + 0.1 * crc
