"""Which posting segments a write merges: the smallest few, never more units than a bound.

Both backends add one segment per write and merge the smallest once there are too many. An
unbounded merge would at some point rewrite most of the index in one transaction and hold
all of it in the writer's memory, so a merge takes at most ``max_units`` units (live and
dead): past that size a segment is left as it is, and a large index keeps about one segment
per ``max_units`` units beside the small ones (reads visit one more block each).
"""

from __future__ import annotations

from collections.abc import Sequence


def segments_to_merge(
    sizes: Sequence[tuple[int, int]], most: int, fan_in: int, max_units: int
) -> list[int]:
    """The segments to merge after a write, given (segment, units) smallest first.

    Nothing while there are at most ``most`` segments; else the longest run of the
    smallest, up to ``fan_in``, whose units add up to at most ``max_units`` (two or more).
    """
    if len(sizes) <= most:
        return []
    chosen: list[int] = []
    total = 0
    for segment, units in sizes[:fan_in]:
        if total + units > max_units:
            break
        chosen.append(segment)
        total += units
    return chosen if len(chosen) >= 2 else []
