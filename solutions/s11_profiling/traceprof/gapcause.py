"""The largest gap on the GPU's timeline and what the host was doing meanwhile."""

from __future__ import annotations

from .events import Event
from .launches import HOST_CALL_CATEGORIES, OP_CATEGORIES, join_launches
from .timeline import Gap, gaps

HOST_CATEGORIES = OP_CATEGORIES + HOST_CALL_CATEGORIES + ("python_function",)


def largest_gap(events: list[Event]) -> Gap:
    """The longest of gaps(events) (the first of equals). Raises ValueError when the GPU never idles."""
    # BEGIN SOLUTION
    found = gaps(events)
    if not found:
        raise ValueError("the GPU has no idle gap in this trace")
    return max(found, key=lambda g: (g.dur, -g.start))
    # END SOLUTION


def gap_cause(events: list[Event], gap: Gap) -> Event | None:
    """The host event that kept the GPU waiting during `gap`.

    Look at the thread whose call enqueued `gap.after` (its pid and tid). Among that thread's host
    events (HOST_CATEGORIES) that overlap the gap by at least half its duration, return the innermost:
    the shortest (on a tie, the one that starts last). None when `gap.after` has no call or no host
    event overlaps that much.
    """
    # BEGIN SOLUTION
    call = next((lch.call for lch in join_launches(events) if lch.gpu is gap.after), None)
    if call is None:
        return None

    def overlap(e: Event) -> float:
        return min(e.end, gap.end) - max(e.ts, gap.start)

    cands = [e for e in events if e.cat in HOST_CATEGORIES and e.pid == call.pid and e.tid == call.tid
             and overlap(e) >= gap.dur / 2]
    return min(cands, key=lambda e: (e.dur, -e.ts), default=None)
    # END SOLUTION
