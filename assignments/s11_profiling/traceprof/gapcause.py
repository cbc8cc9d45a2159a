"""The largest gap on the GPU's timeline and what the host was doing meanwhile."""

from __future__ import annotations

from .events import Event
from .launches import HOST_CALL_CATEGORIES, OP_CATEGORIES, join_launches
from .timeline import Gap, gaps

HOST_CATEGORIES = OP_CATEGORIES + HOST_CALL_CATEGORIES + ("python_function",)


def largest_gap(events: list[Event]) -> Gap:
    """The longest of gaps(events) (the first of equals). Raises ValueError when the GPU never idles."""
    raise NotImplementedError("s11.5: largest_gap")


def gap_cause(events: list[Event], gap: Gap) -> Event | None:
    """The host event that kept the GPU waiting during `gap`.

    Look at the thread whose call enqueued `gap.after` (its pid and tid). Among that thread's host
    events (HOST_CATEGORIES) that overlap the gap by at least half its duration, return the innermost:
    the shortest (on a tie, the one that starts last). None when `gap.after` has no call or no host
    event overlaps that much.
    """
    raise NotImplementedError("s11.6: gap_cause")
