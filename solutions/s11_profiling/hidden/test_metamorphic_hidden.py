"""Metamorphic and order tests: random small traces with overlapping and nested GPU work on two
streams, ties in start and end times, nested host ranges on two threads, and orphan GPU events.
Each trace is analysed as generated, with its events shuffled, and with every time shifted by a
constant, both from a trace file (through load_trace) and as a list of Events passed directly
(the definitions never mention order: a list need not be sorted). Every answer must equal an
independent computation written here (the timeline by unit cells: times are whole microseconds,
the shift is exact in float64) moved exactly as the definitions say: unchanged by the shuffle,
times shifted by the constant, durations unchanged. Hypothesis shrinks a failure to a short trace.

Budget: a fixed seed and a small example count in CI; AUTOGRADER_HYPOTHESIS_PROFILE=thorough runs
ten times as many examples.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from autograder.testing import in_worker

SCALE = 10 if os.environ.get("AUTOGRADER_HYPOTHESIS_PROFILE") == "thorough" else 1
SHIFT = 2.0**33 + 0.5  # ~2.4 hours in us, like a real trace's clock; exact with whole-us times (< 2^53)
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
HOST = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")


# ---- in the worker: every observable of one trace, as plain data ------------------------------------
def _ev(e) -> list | None:
    return None if e is None else [e.name, e.cat, e.ts, e.dur]


@in_worker
def w_observe(path: str | None, rows: list | None) -> dict:
    """Load `path` (or build Events from `rows` in their order) and return every analysis's answer."""
    import traceprof

    events = traceprof.load_trace(path) if path else [traceprof.Event(*r) for r in rows]
    out = {}
    b = traceprof.temporal_breakdown(events)
    out["breakdown"] = [b.span_us, b.busy_us, b.idle_us, b.compute_us]
    out["kernels"] = {n: [s.count, s.total_us, s.min_us, s.max_us] for n, s in traceprof.kernel_table(events).items()}
    out["gaps"] = [[g.start, g.end, _ev(g.before), _ev(g.after)] for g in traceprof.gaps(events)]
    out["launches"] = sorted([_ev(x.gpu), _ev(x.call), x.delay_us] for x in traceprof.join_launches(events))
    out["time_by_op"] = dict(traceprof.time_by_op(events))
    try:
        g = traceprof.largest_gap(events)
    except ValueError:
        out["largest"] = None
    else:
        out["largest"] = [g.start, g.end, _ev(g.before), _ev(g.after), _ev(traceprof.gap_cause(events, g))]
    return out


# ---- random traces -------------------------------------------------------------------------------
@st.composite
def traces(draw) -> list[dict]:
    """Kineto-shaped complete events: 1..7 GPU events (distinct (start, duration) pairs, whole us,
    ties in starts and ends likely), most with a runtime or driver call on thread 1 or 2, and up to 6
    host ranges (operators, annotations, Python frames) on those threads, often nested."""
    spans: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(1, 7))):
        ts, dur = draw(st.integers(0, 40)), draw(st.integers(1, 12))
        tie = draw(st.sampled_from(["none", "start", "end", "inside"])) if spans else "none"
        if tie == "start":  # starts with an earlier event, ends elsewhere
            ts = draw(st.sampled_from(spans))[0]
        elif tie == "end":  # ends with an earlier event, starts elsewhere
            end = sum(draw(st.sampled_from(spans)))
            ts = max(0, end - dur)
            dur = end - ts
        elif tie == "inside":  # starts later than an earlier event and ends before it (another stream)
            outer_ts, outer_dur = max(spans, key=lambda sp: sp[1])
            ts = outer_ts + min(outer_dur - 1, draw(st.integers(0, 3)))
            dur = max(1, min(dur, outer_ts + outer_dur - ts - 1))
        if (ts, dur) not in spans:
            spans.append((ts, dur))
    events, corr = [], 100
    for i, (ts, dur) in enumerate(spans):
        cat = draw(st.sampled_from(GPU_CATS + ("kernel", "kernel")))
        name = {"kernel": f"k{draw(st.integers(0, 2))}", "gpu_memcpy": "Memcpy HtoD", "gpu_memset": "Memset"}[cat]
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": draw(st.sampled_from([7, 9])),
                       "ts": float(ts), "dur": float(dur), "args": {"stream": 7, "correlation": corr}})
        if draw(st.integers(0, 5)):  # one GPU event in six is an orphan
            call_ts = ts - draw(st.integers(1, 8))
            api = draw(st.sampled_from(["cudaLaunchKernel", "cuLaunchKernelEx"]))
            events.append({"ph": "X", "cat": "cuda_driver" if api.startswith("cuL") else "cuda_runtime", "name": f"{api}#{i}",
                           "pid": 1, "tid": draw(st.sampled_from([1, 2])), "ts": float(call_ts),
                           "dur": float(draw(st.integers(1, 4))), "args": {"correlation": corr}})
        corr += 1
    for j in range(draw(st.integers(0, 6))):
        ts, dur = draw(st.integers(-10, 40)), draw(st.sampled_from([2, 6, 16, 30, 50]))  # equal lengths: ties
        tid = draw(st.sampled_from([1, 2]))
        if j and draw(st.booleans()):  # a twin of the last range: as long, a little later, same thread
            ts, dur, tid = events[-1]["ts"] + draw(st.integers(1, 4)), events[-1]["dur"], events[-1]["tid"]
        events.append({"ph": "X", "cat": draw(st.sampled_from(["cpu_op", "user_annotation", "python_function"])),
                       "name": f"op{j}", "pid": 1, "tid": tid, "ts": float(ts), "dur": float(dur), "args": {}})
    return distinct_host_ranges(events)


def distinct_host_ranges(events: list[dict]) -> list[dict]:
    """Drop a host event with the same thread, start and duration as an earlier one: the
    definitions' tie-breaks (shortest, then latest start) leave such a pair undecided."""
    seen, out = set(), []
    for e in events:
        key = (e["pid"], e["tid"], e["ts"], e["dur"]) if e["cat"] in HOST else None
        if key is None or key not in seen:
            out.append(e)
            seen.add(key)
    return out


# ---- the independent computation ------------------------------------------------------------------
def oracle(events: list[dict]) -> dict:
    """Every answer by the definitions: busy time by whole-us cells, gaps as uncovered runs."""
    gpu = [e for e in events if e["cat"] in GPU_CATS]
    ev = {id(e): [e["name"], e["cat"], e["ts"], e["dur"]] for e in events}
    cells = {c for e in gpu for c in range(int(e["ts"]), int(e["ts"] + e["dur"]))}
    kcells = {c for e in gpu if e["cat"] == "kernel" for c in range(int(e["ts"]), int(e["ts"] + e["dur"]))}
    first, last = min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu)
    out = {"breakdown": [last - first, float(len(cells)), last - first - len(cells), float(len(kcells))]}
    out["kernels"] = {}
    for e in gpu:
        row = out["kernels"].setdefault(e["name"], [0, 0.0, e["dur"], e["dur"]])
        row[:] = [row[0] + 1, row[1] + e["dur"], min(row[2], e["dur"]), max(row[3], e["dur"])]
    gaps, t = [], int(first)
    while t < last:
        if t in cells:
            t += 1
            continue
        end = t
        while end not in cells:
            end += 1
        before = max((e for e in gpu if e["ts"] + e["dur"] == t), key=lambda e: e["ts"])
        after = min((e for e in gpu if e["ts"] == end), key=lambda e: e["ts"] + e["dur"])
        gaps.append([float(t), float(end), ev[id(before)], ev[id(after)]])
        t = end
    out["gaps"] = gaps
    calls = {e["args"]["correlation"]: e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")}
    out["launches"], out["time_by_op"] = [], {}
    for g in gpu:
        call = calls.get(g["args"]["correlation"])
        out["launches"].append([ev[id(g)], None if call is None else ev[id(call)],
                                None if call is None else max(0.0, g["ts"] - call["ts"] - call["dur"])])
        if call is None:
            key = "<unknown>"
        else:
            around = [o for o in events if o["cat"] in ("cpu_op", "user_annotation") and o["tid"] == call["tid"]
                      and o["pid"] == call["pid"] and o["ts"] <= call["ts"] and call["ts"] + call["dur"] <= o["ts"] + o["dur"]]
            op = min(around, key=lambda o: (o["dur"], -o["ts"]), default=None)
            key = f"<{call['name']}>" if op is None else op["name"]
        out["time_by_op"][key] = out["time_by_op"].get(key, 0.0) + g["dur"]
    out["launches"].sort(key=lambda r: r[0])
    out["largest"] = None
    if gaps:
        big = max(gaps, key=lambda g: (g[1] - g[0], -g[0]))
        after = next(g for g in gpu if ev[id(g)] == big[3])
        call = calls.get(after["args"]["correlation"])
        cause = None
        if call is not None:
            half = (big[1] - big[0]) / 2
            near = [h for h in events if h["cat"] in HOST and h["pid"] == call["pid"] and h["tid"] == call["tid"]
                    and min(h["ts"] + h["dur"], big[1]) - max(h["ts"], big[0]) >= half]
            pick = min(near, key=lambda h: (h["dur"], -h["ts"]), default=None)
            cause = None if pick is None else ev[id(pick)]
        out["largest"] = [*big, cause]
    return out


def shifted(answer: dict, c: float) -> dict:
    """The oracle's answer for the trace with every time moved by c: starts move, durations do not."""
    def ev(e):
        return None if e is None else [e[0], e[1], e[2] + c, e[3]]
    out = dict(answer)
    out["gaps"] = [[s + c, e + c, ev(b), ev(a)] for s, e, b, a in answer["gaps"]]
    out["launches"] = [[ev(g), ev(k), d] for g, k, d in answer["launches"]]
    big = answer["largest"]
    out["largest"] = None if big is None else [big[0] + c, big[1] + c, ev(big[2]), ev(big[3]), ev(big[4])]
    return out


# ---- the comparison --------------------------------------------------------------------------------
def variants(events: list[dict], seed: int) -> list[tuple[str, list[dict], float]]:
    """(what was done, the events, the shift): as generated, shuffled, reversed and shifted."""
    rng = random.Random(seed)
    shuffled = rng.sample(events, len(events))
    moved = [e | {"ts": e["ts"] + SHIFT} for e in reversed(events)]
    return [("as generated", events, 0.0), ("shuffled", shuffled, 0.0),
            (f"reversed, every time + {SHIFT}", moved, SHIFT)]


FIELDS = {"breakdown": "temporal_breakdown [span, busy, idle, compute]", "kernels": "kernel_table [count, total, min, max]",
          "gaps": "gaps [start, end, before, after]", "launches": "join_launches [gpu, call, delay] (sorted)",
          "time_by_op": "time_by_op", "largest": "largest_gap [start, end, before, after] and gap_cause"}


HOW = {"file": "from the trace file (through load_trace)", "list": "as an unsorted list of Events"}


def check_trace(events: list[dict], seed: int, how: str) -> None:
    want0 = oracle(events)
    with tempfile.TemporaryDirectory() as folder:
        for what, evs, c in variants(events, seed):
            want = shifted(want0, c) if c else want0
            if how == "file":
                path = Path(folder) / "t.json"
                path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": evs}))
                got = w_observe(str(path), None)
            else:
                got = w_observe(None, [[e["name"], e["cat"], e["ts"], e["dur"], e["pid"], e["tid"], e["args"]] for e in evs])
            for key, label in FIELDS.items():
                assert got[key] == want[key], (
                    f"{label}, {HOW[how]}, events {what}: got {got[key]}, expected {want[key]} "
                    f"(by the handout's definitions). Trace events:\n{json.dumps(evs)}")


def k(name, ts, dur, corr, cat="kernel", tid=7) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur,
            "args": {"stream": 7, "correlation": corr}}


def call(name, ts, dur, corr, tid=1) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def host(name, ts, dur, tid=1, cat="user_annotation") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


# the long kernel started first ends last: the span ends at its end, not at the last-started one's
NESTED_END = [k("long", 0.0, 30.0, 1), k("inner", 5.0, 5.0, 2, tid=9), k("late", 10.0, 8.0, 3), call("c1", -3.0, 2.0, 1),
              call("c2", 1.0, 2.0, 2), call("c3", 6.0, 2.0, 3)]
# two kernels start when the gap ends: `after` is the one that ends first; two end when it starts:
# `before` is the one that started last; the cause ties on length, and so do the two operators
# around the calls c3 and c4: the later one wins both times
TIES = [k("a1", 0.0, 10.0, 1), k("a2", 4.0, 6.0, 2, tid=9), k("b_long", 30.0, 9.0, 3), k("b_short", 30.0, 3.0, 4, tid=9),
        call("c1", -5.0, 1.0, 1), call("c2", -4.0, 1.0, 2), call("c3", 26.0, 2.0, 3), call("c4", 27.0, 2.0, 4),
        host("wait_a", 8.0, 16.0), host("wait_b", 12.0, 16.0), host("op_x", 20.0, 20.0, cat="cpu_op"),
        host("op_y", 22.0, 20.0, cat="cpu_op")]


# from a file: load_trace sorts, so this part holds for any code right on sorted input; as a list: the
# definitions never mention order, so the answers must not depend on it
@pytest.mark.points(3)
@pytest.mark.parametrize("how", ["file", "list"])
@settings(max_examples=25 * SCALE, derandomize=True, database=None, deadline=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=traces(), seed=st.integers(0, 2**16))
@example(events=NESTED_END, seed=1)
@example(events=TIES, seed=2)
def test_answers_follow_the_definitions_under_shuffles_and_shifts(how, events, seed):
    check_trace(events, seed, how)
