"""Input sets of a timed call and the outputs kept from its repetitions.

With input sets (a `Feed`), the call reads static input buffers it was bound to once; before
each repetition the loop copies that repetition's set into them, and after it keeps a copy of
its output, both outside the timed span. A submission is timed on as many distinct sets as
repetitions, so no repetition sees inputs another timed repetition saw: a cache keyed on the
inputs' identity answers with a stale result, and one keyed on their content never hits. Which
kept outputs are checked is chosen after the loop (`pick_checked`), so every one must be right.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Timed repetitions whose kept outputs are checked, drawn after the loop: a submission that
# answers wrong on a fraction f of the repetitions passes with probability about (1 - f)^4.
CHECKED_REPS = 4


def copy_of(value: Any) -> Any:
    """Plain tensors (also inside tuples and lists) cloned; anything else is None. Only exact
    torch.Tensor: an object of the submission's own with a `clone` method would run its code here,
    where nothing is accounted, and could hand back an answer the replays never wrote."""
    import torch

    if type(value) in (tuple, list):
        return type(value)(copy_of(v) for v in value)
    if type(value) in (int, float, bool, str, type(None)):  # immutable builtins: the value itself
        return value
    return torch.Tensor.clone(value) if type(value) is torch.Tensor else None


@dataclass
class Feed:
    """Input sets: `static` are the arguments the timed call is bound to (tensors the loop owns,
    read by a captured graph too), `sets` the source sets copied into them: repetition i runs on
    set i * K // reps (a submission has K = reps: each repetition its own set, copied in before
    it; the judge's own baselines may run several repetitions on one set). `kept[i]` is a copy of
    what repetition i returned, for every i in `keep` (None: every repetition); with hold=False
    each copy is made and dropped (the judge's estimate of their cost on a GPU)."""

    static: tuple
    sets: list[tuple] = field(default_factory=list)
    kept: dict[int, Any] = field(default_factory=dict)
    keep: frozenset[int] | None = None
    hold: bool = True

    @classmethod
    def of(cls, first: tuple) -> Feed:
        """Static buffers shaped as the set `first` and holding its values (plain tensors only)."""
        return cls(tuple(_static_copy(v) for v in first))

    def bind(self, fn: Callable[..., object]) -> Callable[[], object]:
        return lambda: fn(*self.static)

    def rotate(self, sets: list[tuple], keep: frozenset[int] | None = None) -> None:
        """The source sets of the next timing loop and the repetitions whose outputs it keeps:
        ValueError unless each set matches the static buffers (tensors of the same shape, dtype
        and device; other arguments equal)."""
        check_sets([self.static, *sets])
        self.sets, self.kept, self.keep = list(sets), {}, keep

    def load(self, i: int, reps: int) -> None:
        """Before repetition i: copy its set into the static buffers if it starts a new run."""
        import torch

        k = set_of(i, reps, len(self.sets))
        if not self.sets or (i > 0 and set_of(i - 1, reps, len(self.sets)) == k):
            return
        with torch.no_grad():  # a copy into a leaf that requires grad is no autograd op
            for dst, src in zip(self.static, self.sets[k], strict=True):
                if type(dst) is torch.Tensor:
                    dst.copy_(src)

    def keep_output(self, i: int, result: Any) -> None:
        """After repetition i: a copy of its output, if it is one to keep."""
        if self.sets and (self.keep is None or i in self.keep):
            copied = copy_of(result)
            if self.hold:
                self.kept[i] = copied

    def take(self, reps: list[int]) -> list[Any]:
        """The kept outputs of `reps` (KeyError for one not kept); all kept copies are dropped."""
        try:
            return [self.kept[i] for i in reps]
        finally:
            self.kept = {}


def pick_checked(reps: int, count: int = CHECKED_REPS) -> list[int]:
    """The timed repetitions whose outputs are checked: `count` of them drawn from the system's
    entropy (nothing the submission's process can predict or seed), all of them when reps <= count.
    Tests replace this function to pick deterministically."""
    if reps <= count:
        return list(range(reps))
    return sorted(random.SystemRandom().sample(range(reps), count))


def set_of(i: int, reps: int, k: int) -> int:
    """The input set of repetition i of reps over k sets (consecutive runs, as even as they divide)."""
    return i * k // reps if k else 0


def _static_copy(value: Any) -> Any:
    import torch

    if type(value) is torch.Tensor:
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value


def check_sets(sets: list[tuple]) -> None:
    """ValueError unless every set has the same arguments: tensors alike in shape, dtype, device
    and requires_grad at each position, any other argument equal (and of an immutable builtin type)."""
    import torch

    first = sets[0]
    for k, one in enumerate(sets):
        if type(one) not in (tuple, list) or len(one) != len(first):
            raise ValueError(f"measure: input set {k} is not a tuple of {len(first)} arguments")
        for pos, (a, b) in enumerate(zip(first, one, strict=True)):
            if type(a) is torch.Tensor and type(b) is torch.Tensor:
                if (a.shape, a.dtype, a.device, a.requires_grad) != (b.shape, b.dtype, b.device, b.requires_grad):
                    raise ValueError(f"measure: argument {pos} of input set {k} is a tensor of another shape, "
                                     f"dtype, device or requires_grad than in set 0")
            elif type(a) is torch.Tensor or type(b) is torch.Tensor or type(b) not in (int, float, bool, str) \
                    or type(a) is not type(b) or a != b:
                raise ValueError(f"measure: argument {pos} of input set {k} must be a tensor as in set 0, or "
                                 f"an int, float, bool or str equal to set 0's")
