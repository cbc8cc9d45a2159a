"""README "Analysis": each number of answers/busbw.toml against the same quantity recomputed here
from the student's own measurement, answers/busbw.json (busbw.py's output), after checking that the
file is complete and physically plausible. CPU only: the file is read, nothing is timed. Sizes,
worlds and implementations come from busbw.py (the master copy, not the student's)."""

from __future__ import annotations

import functools
import json
import math
import statistics

import pytest
from busbw import IMPLS, SIZES, WORLDS

from autograder.testing import numeric_answer, read_answer

DATA = "answers/busbw.json"
HINT = "run `python busbw.py` (the full sweep, not --quick) and keep the file it writes"
MAX_BUSBW = 200e9  # bytes/s: more than any CPU's memory bandwidth; a larger value means times in the wrong unit


def _is_time(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 1e-7 < v < 60.0


@functools.cache
def medians(root: str) -> dict[tuple[int, str, int], float]:
    """{(world, impl, bytes): median seconds} of the student's file, after its checks (all problems at once)."""
    try:
        data = json.loads(read_answer(root, DATA))
    except AssertionError as e:  # missing, or a link
        raise AssertionError(f"{e} ({HINT})") from None
    except ValueError as e:
        raise AssertionError(f"{DATA} is not valid JSON ({e}): {HINT}") from None
    records = data.get("records") if isinstance(data, dict) else None
    if not isinstance(records, list) or data.get("dtype") != "float32":
        raise AssertionError(f"{DATA} must be busbw.py's object with a records list and dtype float32: {HINT}")
    problems, out = [], {}
    for r in records:
        key = (r.get("world"), r.get("impl"), r.get("bytes")) if isinstance(r, dict) else None
        if key is None or key[0] not in WORLDS or key[1] not in IMPLS or key[2] not in SIZES:
            problems.append(f"record {str(r)[:80]} is not one of busbw.py's (world, impl, bytes)")
            continue
        times = r.get("times_s")
        if key in out:
            problems.append(f"{key} appears twice")
        elif not isinstance(times, list) or len(times) < 3 or not all(_is_time(t) for t in times):
            problems.append(f"{key}: times_s must list 3 or more repetitions, each in seconds (1e-7 to 60)")
        else:
            out[key] = statistics.median(times)
            world, _, nbytes = key
            if nbytes / out[key] * 2 * (world - 1) / world > MAX_BUSBW:
                problems.append(f"{key}: a median of {out[key]:.3g} s gives a bus bandwidth above "
                                f"{MAX_BUSBW / 1e9:g} GB/s: seconds, measured on this kind of machine?")
    missing = [(w, i, s) for w in WORLDS for i in IMPLS for s in SIZES if (w, i, s) not in out]
    if missing:
        problems.append(f"{len(missing)} (world, impl, bytes) have no valid record, e.g. {missing[:3]}")
    if problems:
        raise AssertionError(f"{DATA}: " + "; ".join(problems[:6]) + f" ({HINT})")
    return out


def bus_gbs(m: dict, world: int, impl: str, nbytes: int) -> float:
    """nccl-tests' all-reduce bus bandwidth of the median time, in GB/s (1e9 bytes/s)."""
    return nbytes / m[world, impl, nbytes] * 2 * (world - 1) / world / 1e9


def half_peak_bytes(m: dict, world: int, impl: str) -> int:
    peak = max(bus_gbs(m, world, impl, s) for s in SIZES)
    return min(s for s in SIZES if bus_gbs(m, world, impl, s) >= peak / 2)


QUANTITIES = {
    "ring_busbw_gbs_largest_w4": lambda m: bus_gbs(m, 4, "ring", SIZES[-1]),
    "gloo_busbw_gbs_largest_w4": lambda m: bus_gbs(m, 4, "gloo", SIZES[-1]),
    "ring_over_gloo_largest_w2": lambda m: bus_gbs(m, 2, "ring", SIZES[-1]) / bus_gbs(m, 2, "gloo", SIZES[-1]),
    "ring_half_peak_bytes_w4": lambda m: half_peak_bytes(m, 4, "ring"),
    "ring_step_latency_us_w4": lambda m: 1e6 * m[4, "ring", SIZES[0]] / (2 * (4 - 1)),
    "doubling_over_ring_time_smallest_w4": lambda m: m[4, "recursive_doubling", SIZES[0]] / m[4, "ring", SIZES[0]],
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_busbw_number_matches_your_own_measurement(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "busbw", key)
    expected = QUANTITIES[key](medians(str(request.config.rootpath)))
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/busbw.toml: {key} = {answer}, but your {DATA} gives {expected:.4g}")
