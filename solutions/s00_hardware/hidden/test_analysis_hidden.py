"""README "Analysis": answers/machine.json (the student's run of measure_machine.py, timed by their
own `benchmark`) checked for shape and physical plausibility, then each number of answers/machine.toml
against the same quantity recomputed from that file. Nothing is timed here: the file is the measurement."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from measure_machine import COPY_BYTES, DTYPES, REPS, SIZES, WARMUP

from autograder.host.stage import read_no_follow
from autograder.testing import numeric_answer

DATA = "answers/machine.json"
SMALL = SIZES[0]
# No single device today beats 1e16 FLOP/s dense or moves 2e13 B/s; every machine of the last two
# decades multiplies at 1e9 FLOP/s and copies at 1e8 B/s. A time outside these was not measured.
MAX_FLOPS, MAX_BYTES_PER_S = 1e16, 2e13
MIN_FLOPS, MIN_BYTES_PER_S = 1e9, 1e8


def _bad(why: str):
    raise AssertionError(f"{DATA}: {why}; run `python measure_machine.py` again and leave its output as written")


def _times(values, what: str, count: int) -> list[float]:
    if not (isinstance(values, list) and len(values) == count and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0 for t in values)):
        _bad(f"{what} must be a list of {count} positive times in seconds")
    return [float(t) for t in values]


def load_run(root) -> dict:
    """The student's run as {dtype_bytes, first: {n: s}, matmul: {n: [s]}, copy: [s]}."""
    try:
        raw = read_no_follow(root / DATA)[: 1 << 20]
    except FileNotFoundError:
        raise AssertionError(f"{DATA} is missing: run `python measure_machine.py` (README, 'Analysis')") from None
    except OSError as e:
        raise AssertionError(f"{DATA} could not be read ({e.strerror}; a link is refused)") from None
    try:
        run = json.loads(raw)
    except ValueError as e:
        _bad(f"not valid JSON ({e})")
    if not isinstance(run, dict) or not isinstance(run.get("device"), str) or run["device"] not in DTYPES:
        _bad(f"'device' must be one of {sorted(DTYPES)}")
    dtype = DTYPES[run["device"]]
    if run.get("dtype") != str(dtype).removeprefix("torch.") or run.get("dtype_bytes") != dtype.itemsize:
        _bad(f"a {run['device']} run multiplies in {dtype} ({dtype.itemsize} bytes)")
    if run.get("warmup") != WARMUP or run.get("reps") != REPS:
        _bad(f"the run takes {WARMUP} warm-up calls and {REPS} timed reps")
    matmul = run.get("matmul")
    if not isinstance(matmul, list) or [m.get("n") if isinstance(m, dict) else None for m in matmul] != list(SIZES):
        _bad(f"'matmul' must hold the sizes {list(SIZES)} in this order")
    copy = run.get("copy")
    if not isinstance(copy, dict) or copy.get("nbytes") != COPY_BYTES:
        _bad(f"'copy' must copy {COPY_BYTES} bytes")
    out = {"dtype_bytes": dtype.itemsize, "copy": _times(copy.get("times_s"), "copy", REPS),
           "matmul": {m["n"]: _times(m.get("times_s"), f"matmul n={m['n']}", REPS) for m in matmul},
           "first": {m["n"]: _times([m.get("first_call_s")], f"matmul n={m['n']} first_call_s", 1)[0] for m in matmul}}
    for n, times in out["matmul"].items():
        if 2 * n**3 / min(times) > MAX_FLOPS:
            _bad(f"matmul n={n} in {min(times):.3g} s is {2 * n**3 / min(times):.3g} FLOP/s, faster than any device")
    if flops(out, SIZES[-1]) < MIN_FLOPS:
        _bad(f"matmul n={SIZES[-1]} is slower than {MIN_FLOPS:.0e} FLOP/s (are its times in seconds?)")
    if not statistics.median(out["matmul"][SIZES[-1]]) > statistics.median(out["matmul"][SMALL]):
        _bad(f"matmul n={SIZES[-1]} ({(SIZES[-1] // SMALL) ** 3}x the work) is not slower than n={SMALL}")
    if not MIN_BYTES_PER_S <= bandwidth(out) <= 2 * COPY_BYTES / min(out["copy"]) <= MAX_BYTES_PER_S:
        _bad(f"the copy times imply a bandwidth outside [{MIN_BYTES_PER_S:.0e}, {MAX_BYTES_PER_S:.0e}] B/s")
    return out


# The definitions of README "Analysis", on a checked run.
def flops(run, n):  # achieved FLOP/s of the n x n matmul
    return 2 * n**3 / statistics.median(run["matmul"][n])


def bandwidth(run):  # achieved copy bandwidth, bytes read + written per second
    return 2 * COPY_BYTES / statistics.median(run["copy"])


def ridge(run):  # measured compute roof (the best of the four matmuls) / measured memory roof
    return max(flops(run, n) for n in SIZES) / bandwidth(run)


def intensity(run, n):  # gemm_workload(n, n, n, b).intensity: 2 n^3 FLOPs over 3 n^2 b bytes
    return 2 * n / (3 * run["dtype_bytes"])


def _small(run, stat):
    return stat(run["matmul"][SMALL]) / statistics.median(run["matmul"][SMALL])


QUANTITIES = {
    "copy_gb_per_s": lambda run: bandwidth(run) / 1e9,
    "ridge_flop_per_byte": ridge,
    f"roof_fraction_n{SMALL}": lambda run: flops(run, SMALL) / min(ridge(run), intensity(run, SMALL)) / bandwidth(run),
    f"mean_over_median_n{SMALL}": lambda run: _small(run, statistics.mean),
    f"first_call_over_median_n{SMALL}": lambda run: _small(run, lambda _: run["first"][SMALL]),
}


@pytest.mark.points(1)
def test_your_run_is_on_file_and_physically_possible(request):
    load_run(request.config.rootpath)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("n", SIZES)
def test_achieved_tflops_match_your_run(n, request, tol):
    answer = numeric_answer(request.config.rootpath, "machine", f"tflops_n{n}")
    expected = flops(load_run(request.config.rootpath), n) / 1e12
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/machine.toml: tflops_n{n} = {answer}, but your run gives {expected:.4g} (2 n^3 / median / 1e12)")


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_run(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "machine", key)
    expected = QUANTITIES[key](load_run(request.config.rootpath))
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/machine.toml: {key} = {answer}, but your run gives {expected:.4g}")


@pytest.mark.points(1)
def test_memory_bound_count_matches_your_ridge(request, tol):
    answer = numeric_answer(request.config.rootpath, "machine", "memory_bound_count")
    run = load_run(request.config.rootpath)
    below = [n for n in SIZES if intensity(run, n) < ridge(run)]
    assert answer == pytest.approx(len(below), abs=tol("numeric answer, count")["atol"]), (
        f"answers/machine.toml: memory_bound_count = {answer}, but by your ridge ({ridge(run):.4g} FLOP/byte) "
        f"the sizes below it are {below or 'none'}")
