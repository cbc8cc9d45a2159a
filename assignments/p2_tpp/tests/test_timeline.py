"""The timeline's Chrome trace from hand-made events of two ranks: microseconds from the earliest
start, one row (tid) per rank named "rank r", the kind as the category."""

from __future__ import annotations

import json

import pytest
from tpp import chrome_trace


def ev(rank, kind, name, start, end, nbytes=0, peer=-1, mb=-1, step=0):
    return dict(rank=rank, kind=kind, name=name, start_ns=start, end_ns=end, bytes=nbytes, peer=peer,
                microbatch=mb, step=step)


@pytest.mark.points(2)
def test_chrome_trace_merges_ranks_in_microseconds_from_the_first_event():
    events = [[ev(0, "compute", "layer 0 mlp", 5_000, 9_000, mb=0), ev(0, "send", "activations", 9_500, 9_800, 512, 1, 0)],
              [ev(1, "recv", "activations", 2_000, 10_000, 512, 0, 0), ev(1, "compute", "lm_head", 10_000, 12_500, mb=0)]]
    trace = chrome_trace(events)
    json.dumps(trace)
    spans = sorted((e for e in trace["traceEvents"] if e["ph"] == "X"), key=lambda e: (e["tid"], e["ts"]))
    assert [(e["tid"], e["cat"], e["name"], e["ts"], e["dur"]) for e in spans] == [
        (0, "compute", "layer 0 mlp", 3.0, 4.0), (0, "send", "activations", 7.5, 0.3),
        (1, "recv", "activations", 0.0, 8.0), (1, "compute", "lm_head", 8.0, 2.5)]
    assert spans[1]["args"] == {"bytes": 512, "peer": 1, "microbatch": 0, "step": 0}
    rows = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert rows == {0: "rank 0", 1: "rank 1"}
