"""Where the GPU time goes: attention, GEMM, elementwise, copies, communication and the rest, by kernel name."""

from __future__ import annotations

import re

from .events import Event
from .timeline import kernel_table

CATEGORIES = ("attention", "gemm", "elementwise", "memory", "communication", "other")

# The course's rules, tried in this order on the kernel's full name (case-insensitive search):
RULES = (
    ("memory", r"^(Memcpy|Memset)"),                       # gpu_memcpy / gpu_memset events
    ("communication", r"nccl"),                             # before "reduce": ncclDevKernel_AllReduce_...
    ("attention", r"attn|attention|flash|fmha|paged_decode"),
    ("gemm", r"gemm|nvjet|cutlass|cublas|xmma|splitKreduce"),
    ("elementwise", r"elementwise|rms_norm|rope|silu|softmax|gather|index|copy|cat|reduce|fill"),
)


def classify(name: str) -> str:
    """The category of a kernel name: the first rule of RULES whose pattern matches, else "other"."""
    # BEGIN SOLUTION
    for category, pattern in RULES:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return category
    return "other"
    # END SOLUTION


def category_shares(events: list[Event]) -> dict[str, float]:
    """category -> its share of the summed GPU event time (every category of CATEGORIES present,
    0.0 when empty; the shares sum to 1). Raises ValueError when there is no GPU time."""
    # BEGIN SOLUTION
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for name, stat in kernel_table(events).items():
        totals[classify(name)] += stat.total_us
    whole = sum(totals.values())
    if whole <= 0:
        raise ValueError("no GPU time in this trace")
    return {c: t / whole for c, t in totals.items()}
    # END SOLUTION
