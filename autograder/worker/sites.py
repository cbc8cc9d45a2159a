"""Where in the package each torch function was first called: a torch-function mode that only
notes call sites, so that an op refused by the accounting can be shown with its line. It decides
nothing (a submission that pops it loses only the line in its own failure reason)."""

from __future__ import annotations

from typing import Any, Protocol


class SiteNoter(Protocol):
    """Who is told of each call (worker/accounting.py's Accountant, which imports this module)."""

    def note_site(self, name: str, args: Any, kwargs: Any) -> None: ...

_OPERATOR_OPS = {"truediv": "div", "rtruediv": "div", "floordiv": "floor_divide", "rmul": "mul", "radd": "add",
                 "rsub": "rsub", "pow": "pow", "rpow": "pow", "neg": "neg", "lt": "lt", "gt": "gt", "getitem": "index"}


def short_name(name: str) -> str:
    """A torch function's or an aten op's short name as both sides key it ("__mul__" -> "mul")."""
    key = name.strip("_")
    return _OPERATOR_OPS.get(key, key)


class Sites:
    """A torch-function mode that notes where the package called each torch function."""

    @staticmethod
    def push(accountant: SiteNoter) -> Sites | None:
        try:
            import torch
            from torch.overrides import TorchFunctionMode
        except ImportError:
            return None

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                accountant.note_site(getattr(func, "__name__", ""), args, kwargs)
                return func(*args, **(kwargs or {}))

        sites = Sites()
        sites.mode, sites.torch = Mode(), torch
        torch._C._push_on_torch_function_stack(sites.mode)
        return sites

    def pop(self) -> None:
        """Pops the mode if it is still on top (code that left a mode of its own above it only
        keeps this one a while longer; it decides nothing)."""
        c = self.torch._C
        depth = c._len_torch_function_stack()
        if depth and c._get_function_stack_at(depth - 1) is self.mode:
            c._pop_torch_function_stack()
