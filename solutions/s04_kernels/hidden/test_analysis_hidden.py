"""README "Analysis: your kernels on the roofline": each number of answers/roofline.toml against the
same quantity recomputed here from the perf tests' shapes (roofline.KERNELS, the master copy) and
the student's own timings file, answers/kernel_timings.json (roofline.py's output, or the course
H200's file copied there). CPU only: the file is read, nothing is timed."""

from __future__ import annotations

import functools
import json
import math

import pytest
from roofline import KERNELS

from autograder.testing import numeric_answer, read_answer

PEAK_FLOPS = 989e12  # H200 datasheet: dense bf16 tensor FLOP/s (its 1,979 is with 2:4 sparsity)
PEAK_HBM = 4.8e12  # H200 datasheet: HBM3e bytes/s
TIMINGS = "answers/kernel_timings.json"
SPECS = {spec["name"]: spec for spec in KERNELS}
WIDTH = {"bfloat16": 2, "float16": 2, "float32": 4}
FLOPS_PER_ELEMENT = {"fused_add_rmsnorm": 5, "softmax": 5, "swiglu": 4}  # README's table


def numel(shape):
    return math.prod(shape)


def bytes_moved(name):
    """Each input read once, each output written once (the perf tests' count)."""
    spec = SPECS[name]
    s, b = spec["shapes"], WIDTH[spec["dtype"]]
    if name == "fused_add_rmsnorm":  # read x, residual, weight; write out, new residual
        return (4 * numel(s["x"]) + numel(s["weight"])) * b
    if name == "softmax":
        return 2 * numel(s["x"]) * b
    if name == "swiglu":
        return 3 * numel(s["gate"]) * b
    kv_heads, head_dim = s["k_cache"][2], s["k_cache"][3]  # K and V of every context token; q read, out written
    return (2 * sum(spec["args"]["context_lens"]) * kv_heads * head_dim + 2 * numel(s["q"])) * b


def flops(name):
    spec = SPECS[name]
    if name == "paged_decode":  # q.K and p.V: 2 D FLOPs each per (query head, context token)
        heads, head_dim = spec["shapes"]["q"][1:]
        return 4 * heads * head_dim * sum(spec["args"]["context_lens"])
    return FLOPS_PER_ELEMENT[name] * numel(next(iter(spec["shapes"].values())))


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@functools.cache
def timings(root: str) -> dict:
    """The student's timings file after its schema and plausibility checks: every problem at once."""
    hint = f"run `python roofline.py` on a CUDA GPU, or copy kernel_timings_h200.json to {TIMINGS}"
    try:
        data = json.loads(read_answer(root, TIMINGS))
    except AssertionError as e:  # missing, or a link
        raise AssertionError(f"{e} ({hint})") from None
    except ValueError as e:
        raise AssertionError(f"{TIMINGS} is not valid JSON ({e}): {hint}") from None
    keys = {"note", "device", "copy_bytes_per_s", "kernels"}
    if not isinstance(data, dict) or set(data) != keys:
        raise AssertionError(f"{TIMINGS} must be an object with exactly the keys {sorted(keys)}: {hint}")
    problems = []
    if not isinstance(data["device"], str) or not data["device"].strip():
        problems.append("device must name the GPU")
    copy = data["copy_bytes_per_s"]
    if not _is_number(copy) or not 5e10 <= copy <= 2e13:  # 50 GB/s to 20 TB/s: any GPU's memory
        problems.append(f"copy_bytes_per_s = {copy!r} is not a GPU's copy bandwidth in bytes/s (read + written)")
        copy = None
    records = data["kernels"] if isinstance(data["kernels"], list) else []
    names = [r.get("name") if isinstance(r, dict) else None for r in records]
    if sorted(map(str, names)) != sorted(SPECS):
        problems.append(f"kernels must hold one record for each of {sorted(SPECS)}, got names {names}")
    for record in (r for r in records if isinstance(r, dict) and r.get("name") in SPECS):
        name, seconds = record["name"], record.get("median_s")
        want = {**SPECS[name], "median_s": seconds}
        for field in sorted(set(want) | set(record)):
            if record.get(field) != want.get(field):
                problems.append(f"{name}: {field} is {record.get(field)!r}, the perf test's is {want.get(field)!r}")
        if not _is_number(seconds) or seconds <= 0:
            problems.append(f"{name}: median_s = {seconds!r} must be a positive number of seconds")
        elif copy is not None and not 1e-3 <= bytes_moved(name) / seconds / copy <= 1.5:
            problems.append(f"{name}: median_s = {seconds!r} gives {bytes_moved(name) / seconds / copy:.3g} of the "
                            "copy bandwidth (plausible: 0.001 to 1.5); seconds, not ms or us, on a GPU")
    if problems:
        raise AssertionError(f"{TIMINGS}: " + "; ".join(problems) + f" ({hint})")
    return {"copy": copy, **{r["name"]: r["median_s"] for r in records}}


def achieved(name, t):
    return bytes_moved(name) / t[name]


QUANTITIES = {  # key -> (needs the timings file, value from (timings or None))
    "ridge_point_flop_per_byte": (False, lambda t: PEAK_FLOPS / PEAK_HBM),
    "copy_fraction_of_datasheet": (True, lambda t: t["copy"] / PEAK_HBM),
}
for _name in SPECS:
    QUANTITIES |= {
        f"{_name}_bytes": (False, lambda t, n=_name: bytes_moved(n)),
        f"{_name}_flops": (False, lambda t, n=_name: flops(n)),
        f"{_name}_intensity": (False, lambda t, n=_name: flops(n) / bytes_moved(n)),
        f"{_name}_tb_per_s": (True, lambda t, n=_name: achieved(n, t) / 1e12),
        f"{_name}_copy_fraction": (True, lambda t, n=_name: achieved(n, t) / t["copy"]),
    }


@pytest.mark.kernels()  # reads files only: no kernel of the package runs
@pytest.mark.points(0.25)
@pytest.mark.parametrize("key", QUANTITIES)
def test_roofline_number_matches_your_own_timings(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "roofline", key)
    needs_file, value = QUANTITIES[key]
    expected = value(timings(str(request.config.rootpath)) if needs_file else None)
    source = f"your {TIMINGS}" if needs_file else "the perf tests' shapes"
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/roofline.toml: {key} = {answer}, but {source} gives {expected:.4g}")
