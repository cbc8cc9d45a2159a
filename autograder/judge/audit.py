"""The guarded audit: evidence for a kernel exercise that does not rest on the submission's word.

The op and kernel ledger of a test is kept in the worker, where the submission runs. So for a
kernel exercise (`compute_in_kernels`), the judge also picks one call of each passed test, at
random among its calls of a package function with plain arguments (tensors, numbers, strings),
deciding before each call is sent so the worker cannot tell which one it will be, and keeps a copy
of its arguments (before and after: a kernel may write into one) and of its result. After the
test it sends the same call to an audit worker: a second,
fresh worker whose dispatcher refuses every torch op off the exercise's allowlist from before the
package imported (autograder/worker/guard.py), that reads the package as the judge staged it (a
copy taken before any worker ran) and that starts with empty writable folders, so nothing the
first worker wrote (a file of cached answers) reaches it. The test passes only if that call
returns, and leaves in its arguments, what the first worker did; anything else (a refused op, another value, a crash) fails
it, naming the call.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.judge.client import WorkerClient
from autograder.judge.replies import WorkerDied
from autograder.judge.proxies import BoundMethod, PathRef, Remote
from autograder.protocol.messages import Op

_random = random.SystemRandom()  # the worker cannot predict or replay the judge's choice
RTOL = 1e-2  # the same kernel on the same inputs: only the order of a split reduction may differ
ATOL_SHARE = 1e-2  # of the largest magnitude of the first worker's result


@dataclass
class AuditCall:
    """One call of a package function: its name, copies of its arguments before the call and of its result."""

    path: str
    args: tuple
    kwargs: dict
    result: Any = None
    args_after: tuple = ()  # the arguments as the call left them (a kernel may write into one)
    live: tuple = field(default=(), repr=False)  # the test's own arguments, until the call returns


@dataclass
class Picker:
    """Chooses the call of a test to audit: each eligible call replaces the choice with probability
    1/n (n eligible calls so far), decided before the call is sent, so every call is equally likely."""

    seen: int = 0
    call: AuditCall | None = None

    def reset(self) -> None:
        self.seen, self.call = 0, None

    def before(self, op: Op, args: tuple) -> AuditCall | None:
        if op is not Op.CALL or len(args) != 3:
            return None
        target, call_args, kwargs = args
        path = _path_of(target)
        if path is None or not _plain(call_args) or not _plain(kwargs):
            return None
        self.seen += 1
        if _random.randrange(self.seen):
            return None
        return AuditCall(path, _copy(call_args), _copy(kwargs), live=call_args)

    def after(self, call: AuditCall, value: Any) -> None:
        live, call.live = call.live, ()
        if _plain(value):
            call.result, call.args_after = _copy(value), _copy(live)
            self.call = call


def _path_of(target: Any) -> str | None:
    if not isinstance(target, Remote):
        return None
    path = object.__getattribute__(target, "_ag_path")
    return path if type(path) is str and path else None


def _plain(value: Any, depth: int = 0) -> bool:
    """Tensors of the judge, numbers, strings, dtypes and devices, in tuples, lists and str-keyed dicts."""
    import torch

    if depth > 4:
        return False
    if type(value) in (int, float, bool, str, type(None), torch.dtype, torch.device, torch.Tensor):
        return True
    if type(value) in (tuple, list):
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


def _copy(value: Any) -> Any:
    import torch

    if type(value) is torch.Tensor:
        return value.detach().clone()
    if type(value) in (tuple, list):
        return type(value)(_copy(v) for v in value)
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return value


def differs(got: Any, expected: Any, where: str = "result") -> str:
    """"" when `got` matches `expected` (tensors within RTOL and ATOL_SHARE of the largest expected
    magnitude, NaN where it has NaN; everything else equal), else what differs first."""
    import torch

    if type(expected) is torch.Tensor:
        if type(got) is not torch.Tensor:
            return f"{where} is a {type(got).__name__}, not a tensor"
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return f"{where} is {tuple(got.shape)} {got.dtype}, not {tuple(expected.shape)} {expected.dtype}"
        got, expected = got.cpu(), expected.cpu()
        if not expected.is_floating_point():
            return "" if torch.equal(got, expected) else f"{where} holds other values"
        scale = float(expected.double().nan_to_num(0.0, 0.0, 0.0).abs().max()) if expected.numel() else 0.0
        ok = torch.isclose(got.double(), expected.double(), rtol=RTOL, atol=ATOL_SHARE * scale, equal_nan=True)
        if bool(ok.all()):
            return ""
        bad = int((~ok).sum())
        return f"{where} differs in {bad} of {expected.numel()} elements (rtol {RTOL}, atol {ATOL_SHARE} x {scale:.3g})"
    if type(expected) in (tuple, list):
        if type(got) not in (tuple, list) or len(got) != len(expected):
            return f"{where} is not a sequence of {len(expected)}"
        return next((d for i, (g, e) in enumerate(zip(got, expected)) if (d := differs(g, e, f"{where}[{i}]"))), "")
    if type(expected) is float and type(got) is float:
        return "" if abs(got - expected) <= RTOL * abs(expected) + 1e-12 else f"{where} is {got!r}, not {expected!r}"
    return "" if got == expected else f"{where} is {got!r}, not {expected!r}"


@dataclass(frozen=True)
class Recipe:
    """How a worker callable came to be: the `in_worker` helper (its file, module, qualname) and the
    plain arguments it was called with, so that another worker can make the same callable."""

    path: str
    module: str
    qualname: str
    args: tuple
    kwargs: dict


_recipes: dict[int, tuple[Any, Recipe]] = {}  # id(Remote) -> (a weak reference to it, its recipe)


def note_recipe(value: Any, recipe: Recipe) -> None:
    """Remember how `value` (what an in_worker helper returned) was made, if it is a worker object
    and the helper's arguments are plain values (anything else cannot be sent to another worker)."""
    import weakref

    if not isinstance(value, Remote) or not _plain(recipe.args) or not _plain(recipe.kwargs):
        return
    key = id(value)
    _recipes[key] = (weakref.ref(value, lambda _, key=key: _recipes.pop(key, None)),
                     Recipe(recipe.path, recipe.module, recipe.qualname, _copy(recipe.args), _copy(recipe.kwargs)))


def recipe_of(fn: Any) -> Recipe | str | None:
    """The recipe of worker callable `fn`, its package path (a function of the package), or None."""
    entry = _recipes.get(id(fn))
    if entry is not None and entry[0]() is fn:
        return entry[1]
    return None if isinstance(fn, BoundMethod) else _path_of(fn)


@dataclass
class GuardedAudit:
    """The judge's audit worker (started at its first audit, kept for the run's later ones)."""

    package: str
    allowed: tuple[str, ...]
    binds: list[tuple[str, str]] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)
    client: WorkerClient | None = None

    def replay(self, call: AuditCall) -> str:
        """"" when the audit worker returns what the first worker did, else the test's failure."""
        name = f"{call.path}(...)"
        try:
            client = self._worker()
            got = client.request(Op.CALL, self._target(client, call.path), call.args, call.kwargs)
        except WorkerDied as exc:
            return f"guarded audit: {name} ended the audit worker ({exc})"
        except Exception as exc:  # noqa: BLE001  whatever the call raised there is the verdict
            return (f"guarded audit: {name}, replayed where torch's compute ops are refused, raised "
                    f"{type(exc).__name__}: {str(exc)[:300]}")
        if diff := differs(got, call.result) or differs(call.args, call.args_after, "argument"):
            return (f"guarded audit: {name}, replayed where torch's compute ops are refused, returned another "
                    f"value than in the test ({diff}): the test's answer did not come from the package's kernels")
        return ""

    def timing_target(self, fn: Any) -> tuple[WorkerClient, Any]:
        """(the audit worker, `fn` made again there) for timing a kernel exercise where torch's
        compute ops are refused: a function of the package by its path, what an `in_worker`
        helper returned by calling that helper there with the same arguments. TypeError for a
        callable that cannot be made again (a method of an object the test built in the worker)."""
        recipe = recipe_of(fn)
        if recipe is None:
            raise TypeError("measure: in a kernel exercise the submission is timed in the audit worker, where "
                            "torch's compute ops are refused, so the timed callable must be a function of the "
                            "package or what an in_worker helper with plain arguments returned")
        client = self._worker()
        if type(recipe) is str:
            return client, self._target(client, recipe)
        return client, client.request(Op.SHIPPED, recipe.path, recipe.module, recipe.qualname,
                                      _copy(recipe.args), _copy(recipe.kwargs))

    @staticmethod
    def _target(client: WorkerClient, path: str) -> Any:
        """The object at `path` as the first worker reached it: an attribute of its module (a name
        such as tritonkernels.softmax can be both a submodule and the function the package exports)."""
        module, _, name = path.rpartition(".")
        return client.request(Op.GETATTR, PathRef(client, module), name) if module else PathRef(client, path)

    def output(self) -> str:
        return self.client.take_output() if self.client is not None else ""

    def _worker(self) -> WorkerClient:
        if self.client is None or not self.client.alive():
            client = WorkerClient(self.package)
            client.guard, client.share_rng = self.allowed, False
            client.view = {"binds": self.binds, "fresh": self.fresh}
            client.start()
            client.ready()
            self.client = client
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.kill()


def pristine_copy(packages: list[str], workdir: Path, judge_dir: Path) -> list[tuple[str, str]]:
    """Copy each package folder of the work dir into the judge's folder (hidden from workers) before
    any worker starts: the audit worker reads these, whatever the first worker later writes."""
    binds = []
    for name in packages:
        source = workdir / name
        if not source.is_dir():
            continue
        target = judge_dir / "pristine" / name
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        binds.append((str(target), str(source)))
    return binds


def writable_folders(workdir: Path) -> list[str]:
    """Where a worker may write that the audit worker must see empty: the shared /tmp and the work
    dir's home and tmp folders (the package folders are replaced by their pristine copies)."""
    folders = ["/tmp", str(workdir / "home"), str(workdir / "tmp")]
    return [f for f in folders if os.path.isdir(f)]
