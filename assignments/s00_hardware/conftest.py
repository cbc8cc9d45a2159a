"""Shared fixtures for s00_hardware: oracles for the formats and a guard against casting shortcuts."""

from __future__ import annotations  # noqa: I001 (the grader's imports first, then the package)

from pathlib import Path

import pytest
import torch
from autograder.testing import in_worker, tolerances
from torch.overrides import TorchFunctionMode

import hwnumerics
from hwnumerics import FloatFormat

# The format's torch dtype, the integer dtype of the same width to view it as, and the bit mask.
TORCH_DTYPES = {
    "bf16": (torch.bfloat16, torch.int16, 0xFFFF),
    "fp16": (torch.float16, torch.int16, 0xFFFF),
    "fp8_e4m3fn": (torch.float8_e4m3fn, torch.uint8, 0xFF),
    "fp8_e5m2": (torch.float8_e5m2, torch.uint8, 0xFF),
}
_LOW_PRECISION = {dt for dt, _, _ in TORCH_DTYPES.values()} | {torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}


def torch_to_bits(x: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Oracle: torch's own cast, as int32 unsigned patterns.

    e4m3fn is the saturating conversion: clamp to +-448 first, then cast. (Recent torch saturates in
    the cast itself; older releases turn finite overflow and inf into NaN. Clamping first gives the
    same oracle on every torch version; clamp keeps NaN as NaN.)
    """
    dtype, int_dtype, mask = TORCH_DTYPES[fmt.name]
    if not fmt.ieee_specials:
        x = x.clamp(-fmt.max_finite, fmt.max_finite)
    return x.to(dtype).view(int_dtype).to(torch.int32) & mask


def torch_from_bits(bits: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Oracle: reinterpret int32 unsigned patterns as the torch dtype and widen to float32."""
    dtype, int_dtype, _ = TORCH_DTYPES[fmt.name]
    if int_dtype == torch.int16:
        narrow = torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16)
    else:
        narrow = bits.to(torch.uint8)
    return narrow.view(dtype).to(torch.float32)


def same_bits_or_both_nan(ours: torch.Tensor, ref: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Elementwise: identical patterns, or both patterns are NaNs of the format (any payload)."""
    return (ours == ref) | (torch_from_bits(ours, fmt).isnan() & torch_from_bits(ref, fmt).isnan())


class _NoLowPrecisionCasts(TorchFunctionMode):
    """Fails any torch op that takes or yields a 16/8-bit float dtype, and any .numpy() call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", repr(func))
        if name == "numpy":
            raise AssertionError("conversions must use torch integer ops, not numpy")
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, torch.dtype) and value in _LOW_PRECISION:
                raise AssertionError(f"{name}(... {value} ...): convert from the bit patterns, not by cast")
        out = func(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if isinstance(o, torch.Tensor) and o.dtype in _LOW_PRECISION:
                raise AssertionError(f"{name} produced a {o.dtype} tensor: convert from the bit patterns")
        return out


# The package functions a test may call under the guard.
_GUARDED = ("to_bits", "from_bits", "round_to_format")


@in_worker
def call_without_casts(name: str, *args, **kwargs):
    """In the worker: the package's function `name` called with low-precision torch dtypes off limits.

    The guard is a TorchFunctionMode, so it must be entered in the process the package runs in.
    """
    if name not in _GUARDED:
        raise ValueError(f"call_without_casts: {name!r} is not one of {_GUARDED}")
    fn = getattr(hwnumerics, name)
    with _NoLowPrecisionCasts():
        return fn(*args, **kwargs)


class TorchReference:
    """The oracle helpers, handed to tests through the `torch_ref` fixture."""

    to_bits = staticmethod(torch_to_bits)
    from_bits = staticmethod(torch_from_bits)
    same_bits_or_both_nan = staticmethod(same_bits_or_both_nan)


@pytest.fixture
def torch_ref() -> TorchReference:
    """Torch's casts as the oracle: torch_ref.to_bits(x, fmt), torch_ref.from_bits(bits, fmt)."""
    return TorchReference()


@pytest.fixture
def no_casts():
    """`no_casts("to_bits", x, fmt)` calls the package's to_bits (or from_bits, round_to_format) in
    the worker with low-precision torch dtypes off limits."""
    return call_without_casts


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
