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
    raise NotImplementedError("s11.1: classify")


def category_shares(events: list[Event]) -> dict[str, float]:
    """category -> its share of the summed GPU event time (every category of CATEGORIES present,
    0.0 when empty; the shares sum to 1). Raises ValueError when there is no GPU time."""
    raise NotImplementedError("s11.2: category_shares")
