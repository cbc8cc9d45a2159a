"""What a worker's reply brings back besides its value: the final state of the arguments the
submission changed in place (written into the judge's own tensors and generators), and the
judge's exception for one the submission raised (a mirror class, never a pytest outcome)."""

from __future__ import annotations

from typing import Any

from autograder.judge.mirrored_errors import RemoteError, mirror_exception
from autograder.protocol.wire import ProtocolError, expect


class WorkerDied(RuntimeError):
    """The submission's process ended or broke the protocol during a request."""


def write_back(sent: list, changed: Any) -> None:
    """Arguments the submission changed in place: their final values, into the judge's tensors
    (and the final state of each generator it was handed, as if it had drawn from ours)."""
    import torch

    tensors, generators = sent
    for entry in expect(changed, list, "changed arguments"):
        if type(entry) is list and len(entry) == 3 and entry[0] == "g":
            index, state = expect(entry[1], int, "generator index"), entry[2]
            if not 0 <= index < len(generators) or not isinstance(state, torch.Tensor):
                raise ProtocolError("a generator state that does not match an argument")
            generators[index].set_state(state)
            continue
        index, value = entry
        target = tensors[expect(index, int, "argument index")] if 0 <= index < len(tensors) else None
        if not isinstance(target, torch.Tensor) or not isinstance(value, torch.Tensor) or \
                value.shape != target.shape or value.dtype != target.dtype:
            raise ProtocolError("an in-place change to an argument that does not match it")
        with torch.no_grad():
            target.copy_(value.to(target.device))


SUBMISSION_LINE = "in your code: "


def remote_exception(info: Any) -> BaseException:
    """The judge's exception for what the worker raised (never a pytest outcome or an interrupt)."""
    if type(info) is not dict:
        return WorkerDied("the worker sent a malformed error")
    name = str(info.get("type", "Exception"))
    bases = [b for b in info.get("bases", []) if type(b) is str] if type(info.get("bases")) is list else []
    cls = mirror_exception(str(info.get("module", "?")), name, bases)
    message = str(info.get("message", ""))
    try:
        exc = cls(message)
    except Exception:  # noqa: BLE001  a builtin whose constructor wants more (UnicodeDecodeError)
        exc = mirror_exception(str(info.get("module", "?")), name, [])(message)
    tb = str(info.get("traceback", ""))
    if isinstance(exc, RemoteError):
        exc.remote_traceback = tb
    where = str(info.get("where", ""))[:500]
    if where:  # the student's line: what the test's reason shows (autograder.judge.plugin)
        exc.add_note(f"{SUBMISSION_LINE}{where}")
    if tb:
        exc.add_note(f"raised in the submission's process:\n{tb}")
    return exc
