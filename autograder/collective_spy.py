"""A counter of the torch.distributed calls a rank makes, for tests of multi-rank exercises (it runs
inside rank functions, beside the package: the worker's word, a diagnosis rather than a proof).

It sees calls made through torch.distributed's Python functions, also through aliases the
package's modules hold, not a call into torch's internals; what grades a run is what the ranks
return, checked in the judge. With `messages`, it also copies what this rank put into each send,
all-reduce and all-gather, for the judge to check what crossed (each rank's input known only to
that rank and the judge).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# torch.distributed function -> the kind counted (the all-gather variants count as one kind, a
# non-blocking send or receive as its blocking kind)
COUNTED = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter", "broadcast": "broadcast",
    "reduce": "reduce", "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "gather": "gather",
    "scatter": "scatter", "send": "send", "recv": "recv", "isend": "send", "irecv": "recv", "barrier": "barrier",
    "batch_isend_irecv": "batch_isend_irecv",
}


def _payload(kind: str, args: tuple, kwargs: dict) -> Any:
    """The tensor a rank contributes to a call of `kind` (None where it sends nothing of its own)."""
    if kind in ("all_reduce", "send", "broadcast", "reduce"):
        return kwargs.get("tensor", args[0] if args else None)
    if kind == "all_gather":  # all_gather(tensor_list, tensor), all_gather_into_tensor(output, input)
        return kwargs.get("tensor", kwargs.get("input_tensor", args[1] if len(args) > 1 else None))
    return None


def _peer(args: tuple, kwargs: dict) -> Any:
    return kwargs.get("dst", kwargs.get("group_dst", args[1] if len(args) > 1 else None))


def _recorder(messages: list) -> Any:
    def record(kind: str, args: tuple, kwargs: dict) -> None:
        if kind == "batch_isend_irecv":  # its P2POps' sends, read from the list it was given
            for op in (args[0] if args else kwargs.get("p2p_op_list", [])):
                if getattr(op.op, "counted_kind", getattr(op.op, "__name__", "")) in ("send", "isend"):
                    messages.append({"kind": "send", "peer": op.peer, "op": None, "data": op.tensor.detach().clone()})
            return
        tensor = _payload(kind, args, kwargs)
        if tensor is not None:
            messages.append({"kind": kind, "peer": _peer(args, kwargs) if kind == "send" else None,
                             "op": str(kwargs.get("op", args[1] if kind == "all_reduce" and len(args) > 1 else "")),
                             "data": tensor.detach().clone()})

    return record


@contextmanager
def counting_collectives(package: str, messages: list | None = None) -> Iterator[Counter]:
    """Within the block, count this process's calls to torch.distributed's collectives and
    point-to-point functions by kind (also through aliases `package`'s modules hold). With
    `messages`, also append {"kind", "peer", "op", "data": a copy of the tensor this rank put in}
    for each send, all-reduce and all-gather. A call made from inside another counted call
    (dist.send runs isend, batch_isend_irecv runs isend) is counted once, as the outer."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    counts: Counter = Counter()
    inside = threading.local()
    record = _recorder(messages) if messages is not None else None
    patches = []
    for name, kind in COUNTED.items():
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, _original=original, _kind=kind, **kwargs):
            if getattr(inside, "depth", 0):
                return _original(*args, **kwargs)
            counts[_kind] += 1
            if record is not None:
                record(_kind, args, kwargs)
            inside.depth = 1
            try:
                return _original(*args, **kwargs)
            finally:
                inside.depth = 0

        counted.counted_kind = kind
        # c10d too: dist.P2POp checks its op against c10d's own isend and irecv
        owners = [dist, c10d] + [m for n, m in list(sys.modules.items())
                                 if m is not None and (n == package or n.startswith(package + "."))]
        for owner in owners:
            for attr, value in list(vars(owner).items()):
                if value is original:
                    patches.append((owner, attr, original))
                    setattr(owner, attr, counted)
    try:
        yield counts
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)
