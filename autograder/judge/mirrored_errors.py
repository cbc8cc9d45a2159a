"""Exceptions the submission raises, as the judge sees them: each worker exception class becomes a
judge class that derives from the nearest builtin exception it derives from (so
`pytest.raises(ValueError)` works) and from RemoteError, never from a pytest outcome or
KeyboardInterrupt (those are not builtin Exception subclasses the mirror could pick)."""

from __future__ import annotations


class RemoteError(Exception):
    """Base of every exception the submission's process raised (mirrored here)."""

    remote_traceback: str = ""


NOT_MIRRORED = {"StopIteration", "StopAsyncIteration"}
_mirrors: dict[tuple[str, str], type] = {}


def mirror_exception(module: str, qualname: str, bases: list[str]) -> type:
    """The judge's class for a worker exception class: its nearest builtin Exception base + RemoteError."""
    key = (module, qualname)
    if key not in _mirrors:
        builtin = next((getattr(__import__("builtins"), b) for b in bases
                        if b not in NOT_MIRRORED and isinstance(getattr(__import__("builtins"), b, None), type)), None)
        parents = (builtin, RemoteError) if builtin is not None and builtin is not Exception else (RemoteError,)
        cls = type(qualname.rsplit(".", 1)[-1], parents, {"__module__": f"worker:{module}"})
        cls._ag_path = f"{module}.{qualname}"  # type: ignore[attr-defined]
        _mirrors[key] = cls
    return _mirrors[key]
