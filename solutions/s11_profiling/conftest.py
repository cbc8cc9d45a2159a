"""Shared by tests/ and hidden/: the committed traces, a builder of small synthetic traces with
planted structure, the worker-side calls that return plain data, and the oracles, which run in the
test's own process (never the package):

- Holistic Trace Analysis (Meta's trace analyzer, `hta`) on the same trace files: its temporal
  breakdown, its per-kernel breakdown and its launch statistics (with ns rounding off, so its
  figures are exact);
- the raw JSON read by the test itself for what HTA does not compute (driver-API launches, which
  HTA's launch statistics skip);
- torch's own flop formulas (torch.utils.flop_counter) for the GEMMs' FLOPs.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

import coursedata
from autograder.testing import in_worker, tolerances

REAL = ("p1_decode_eager", "p1_decode_graphs", "p6_attention_block")


# ---- the raw JSON, read by the test --------------------------------------------------------------
@cache
def raw_events(name: str) -> tuple[dict, ...]:
    with gzip.open(coursedata.profile_path(name), "rt") as f:
        return tuple(e for e in json.load(f)["traceEvents"] if e.get("ph") == "X")


def raw_gpu(name: str) -> list[dict]:
    return [e for e in raw_events(name) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def raw_calls(name: str) -> dict[int, dict]:
    """correlation -> the runtime or driver call, read straight from the JSON."""
    return {e["args"]["correlation"]: e for e in raw_events(name)
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


# ---- the course's kernel categories (the README's table), applied by the test ----------------------
CATEGORY_RULES = (("memory", r"^(Memcpy|Memset)"), ("communication", r"nccl"), ("attention", r"attn|attention|flash|fmha|paged_decode"),
         ("gemm", r"gemm|nvjet|cutlass|cublas|xmma|splitKreduce"),
         ("elementwise", r"elementwise|rms_norm|rope|silu|softmax|gather|index|copy|cat|reduce|fill"))


def rule(name: str) -> str:
    return next((c for c, p in CATEGORY_RULES if re.search(p, name, re.IGNORECASE)), "other")



# ---- HTA: the independent analyzer ------------------------------------------------------------------
@cache
def hta(name: str):
    """HTA's TraceAnalysis of a committed trace (a folder of its own, ns rounding off)."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = Path(tempfile.mkdtemp(prefix=f"hta-{name}-"))
    shutil.copy(coursedata.profile_path(name), folder / f"{name}.json.gz")
    return TraceAnalysis(trace_dir=str(folder))


def hta_temporal(name: str) -> dict:
    row = hta(name).get_temporal_breakdown(visualize=False).iloc[0]
    return {"span": row["kernel_time(us)"], "idle": row["idle_time(us)"], "compute": row["compute_time(us)"]}


def hta_kernels(name: str) -> dict[str, tuple[int, float, float, float]]:
    """name -> (count, sum, min, max) in us, from HTA's kernel breakdown (every kernel, memory ones too)."""
    _, metrics = hta(name).get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**6,
                                                  include_memory_kernels=True)
    table = hta(name).t.symbol_table.get_sym_table()
    out = {}
    for _, r in metrics.iterrows():
        full = r["name"] if isinstance(r["name"], str) else table[r["name"]]
        out[full] = (round(r["sum (us)"] / r["mean (us)"]), r["sum (us)"], r["min (us)"], r["max (us)"])
    return out


def hta_launches(name: str) -> dict[int, tuple[float, float, float]]:
    """correlation -> (cpu_duration, gpu_duration, launch_delay) for the launches HTA joins (runtime
    API only: cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync)."""
    df = hta(name).get_cuda_kernel_launch_stats(visualize=False)[0]
    return {int(r["correlation"]): (r["cpu_duration"], r["gpu_duration"], r["launch_delay"]) for _, r in df.iterrows()}


# ---- synthetic traces with planted structure ------------------------------------------------------------
class TraceBuilder:
    """A Kineto-shaped trace built event by event; write() saves it as .json or .json.gz."""

    def __init__(self) -> None:
        self.events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
        self.next_corr = 100

    def op(self, name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
        self.events.append(e)
        return e

    def launch(self, ts: float, kernel: str, k_ts: float, k_dur: float, call: str = "cudaLaunchKernel",
               call_dur: float = 4.0, tid: int = 1, stream: int = 7, cat: str = "kernel") -> int:
        """A host call at ts and the GPU event it enqueued; returns the correlation id."""
        corr = self.next_corr
        self.next_corr += 1
        api = "cuda_driver" if call.startswith("cu") and not call.startswith("cuda") else "cuda_runtime"
        self.op(call, ts, call_dur, tid=tid, cat=api, correlation=corr)
        self.gpu(kernel, k_ts, k_dur, corr, stream=stream, cat=cat)
        self.events.append({"ph": "s", "cat": "ac2g", "id": corr, "pid": 1, "tid": tid, "ts": ts, "name": "ac2g"})
        return corr

    def gpu(self, kernel: str, ts: float, dur: float, corr: int, stream: int = 7, cat: str = "kernel") -> None:
        self.events.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"device": 0, "stream": stream, "correlation": corr}})

    def write(self, path: Path) -> str:
        data = json.dumps({"schemaVersion": 1, "traceEvents": self.events})
        if path.suffix == ".gz":
            with gzip.open(path, "wt") as f:
                f.write(data)
        else:
            path.write_text(data)
        return str(path)


# ---- in the worker: the package on a file, as plain data ---------------------------------------------
def _event(e) -> list:
    return None if e is None else [e.name, e.cat, e.ts, e.dur]


@in_worker
def w_load(path: str) -> list:
    from traceprof import load_trace

    return [[e.name, e.cat, e.ts, e.dur, e.pid, e.tid, e.correlation] for e in load_trace(path)]


@in_worker
def w_breakdown(path: str) -> dict:
    from traceprof import load_trace, temporal_breakdown

    b = temporal_breakdown(load_trace(path))
    return {"span": b.span_us, "busy": b.busy_us, "idle": b.idle_us, "compute": b.compute_us, "frac": b.idle_fraction}


@in_worker
def w_merge(intervals: list) -> list:
    from traceprof import merge_intervals

    return [list(iv) for iv in merge_intervals([tuple(iv) for iv in intervals])]


@in_worker
def w_kernels(path: str) -> dict:
    from traceprof import kernel_table, load_trace

    return {n: [s.count, s.total_us, s.mean_us, s.min_us, s.max_us] for n, s in kernel_table(load_trace(path)).items()}


@in_worker
def w_gaps(path: str, min_us: float = 0.0) -> list:
    from traceprof import gaps, load_trace

    return [[g.start, g.end, _event(g.before), _event(g.after)] for g in gaps(load_trace(path), min_us)]


@in_worker
def w_launches(path: str) -> list:
    from traceprof import join_launches, load_trace

    return [[_event(x.gpu), x.gpu.correlation, _event(x.call), x.delay_us] for x in join_launches(load_trace(path))]


@in_worker
def w_time_by_op(path: str) -> dict:
    from traceprof import load_trace, time_by_op

    return dict(time_by_op(load_trace(path)))


@in_worker
def w_enclosing(path: str, call_corr: int) -> list | None:
    from traceprof import enclosing_op, load_trace

    events = load_trace(path)
    call = next(e for e in events if e.cat in ("cuda_runtime", "cuda_driver") and e.correlation == call_corr)
    return _event(enclosing_op(events, call))


@in_worker
def w_gap_cause(path: str) -> dict:
    from traceprof import gap_cause, largest_gap, load_trace

    events = load_trace(path)
    try:
        g = largest_gap(events)
    except ValueError as err:
        return {"error": str(err)}
    return {"gap": [g.start, g.end, _event(g.before), _event(g.after)], "cause": _event(gap_cause(events, g))}


@in_worker
def w_shares(path: str) -> dict:
    from traceprof import category_shares, load_trace

    return dict(category_shares(load_trace(path)))


@in_worker
def w_classify(names: list) -> list:
    from traceprof import classify

    return [classify(n) for n in names]


@in_worker
def w_roofline(path: str, peak_flops: float, peak_bw: float) -> list:
    from traceprof import load_trace, roofline

    return [[p.op.name, p.op.batch, p.op.m, p.op.n, p.op.k, p.op.dtype_bytes, p.op.kernel_us, p.op.bias_numel,
             p.op.flops, p.op.bytes, p.intensity, p.achieved_flops_per_s, p.attainable_flops_per_s, p.bound]
            for p in roofline(load_trace(path), peak_flops, peak_bw)]


@in_worker
def w_raises(fn: str, path: str) -> str | None:
    """The ValueError message of traceprof.<fn>(load_trace(path)) (or of load_trace itself), else None."""
    import traceprof

    try:
        getattr(traceprof, fn)(path if fn == "load_trace" else traceprof.load_trace(path))
    except ValueError as err:
        return str(err) or "ValueError"
    return None


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    def pick(name: str) -> dict:
        t = _TOLERANCES(name)
        return {"rel": t["rtol"], "abs": t["atol"]}
    return pick
