"""Helpers for test authors. `oracle()` marks the test's own reference code: the forbidden-API
patches are lifted and the op and kernel accounting records nothing inside it (e.g. SDPA as the
oracle of a student's FlashAttention, HF generate as the oracle of an engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from autograder import accounting

# Filled by the grading plugin while a test runs: (owner object, attribute, original value).
_patched: list[tuple[object, str, object]] = []


def register_patches(patches: list[tuple[object, str, object]]) -> None:
    _patched[:] = patches


@contextmanager
def oracle() -> Iterator[None]:
    """Within this block the forbidden APIs work again and nothing is accounted to the submission.

    Backward passes through an oracle's graph must run inside the block too. Called from the
    submission's own code (directly or through a test helper), it lifts nothing and fails the test.
    """
    acct = accounting.current()
    if acct is not None and (module := accounting.called_from_package(acct.package)):
        acct.ledger.problems.append(f"{module} called autograder.testing.oracle(): the accounting "
                                    "cannot be lifted from inside the submission")
        yield
        return
    saved = [(owner, attr, getattr(owner, attr, None)) for owner, attr, _ in _patched]
    for owner, attr, original in _patched:
        setattr(owner, attr, original)
    with ExitStack() as stack:
        if acct is not None:
            stack.enter_context(acct.paused())
        try:
            yield
        finally:
            for owner, attr, current in saved:
                setattr(owner, attr, current)


def forbidden_stub(name: str) -> Callable[..., object]:
    def _raise(*args: object, **kwargs: object) -> object:
        raise RuntimeError(f"{name} is forbidden in this assignment: implement it yourself")

    _raise.__name__ = name.rsplit(".", 1)[-1]
    return _raise
