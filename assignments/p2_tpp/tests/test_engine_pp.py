"""Pipeline parallelism inside the engine: 5 layers over 2 stages (3 + 2), every step's batch in 2
micro-batches, greedy tokens identical to HF generate (fp32, 64 steps) on both ranks; the run's
timeline: sends after the compute they carry, the next stage's compute after the send, and the
merged Chrome trace (one row per rank)."""

from __future__ import annotations

import json

import pytest
from autograder.testing import in_worker
from conftest import random_prompts
from rank_programs import check_counts, check_pipeline_order, check_tokens, serve_on_rank
from tpp import chrome_trace, plot_timeline

STEPS = 64
PROMPTS = random_prompts(2, [4, 6, 3, 8])


@in_worker
def png_of(events_by_rank: list[list[dict]]) -> bytes:
    import io

    buf = io.BytesIO()
    plot_timeline(events_by_rank, "PP=2").savefig(buf, format="png", dpi=60)
    return buf.getvalue()


def check_chrome_trace(trace: dict, events_by_rank: list[list[dict]]) -> None:
    """Every event once as a complete event in microseconds from the earliest start, one row per rank."""
    json.dumps(trace)  # loads in Perfetto only as JSON
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M"}
    assert names == {r: f"rank {r}" for r in range(len(events_by_rank))}, f"thread names {names}"
    flat = [e for evs in events_by_rank for e in evs]
    assert len(spans) == len(flat), f"{len(spans)} complete events for {len(flat)} recorded"
    origin = min(e["start_ns"] for e in flat)
    want = sorted((e["rank"], e["kind"], round((e["start_ns"] - origin) / 1e3, 3)) for e in flat)
    got = sorted((e["tid"], e["cat"], round(e["ts"], 3)) for e in spans)
    assert got == want, "the trace's (rank, kind, start in us) differ from the recorded events"


@pytest.mark.points(8)
@pytest.mark.world_size(2)
def test_pp2_with_microbatches_serves_hf_greedy_tokens_and_a_consistent_timeline(ranks, tiny_llama, hf_greedy):
    results = ranks.run(serve_on_rank, tiny_llama[0], 1, 2, 2, PROMPTS, STEPS, True)
    check_tokens(results, hf_greedy(PROMPTS, STEPS), "PP=2, 2 micro-batches")
    check_counts(results, tp=1, pp=2, m=2, num_prompts=len(PROMPTS), n=STEPS, case="PP=2")
    overlapped = check_pipeline_order(results, tp=1, m=2, num_prompts=len(PROMPTS), n=STEPS, case="PP=2")
    assert overlapped > 0, f"in none of {STEPS} steps did stage 0 compute micro-batch 1 while stage 1 computed micro-batch 0"
    events = [r["events"] for r in results]
    check_chrome_trace(chrome_trace(events), events)
    png = png_of(events)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000, "plot_timeline did not draw a PNG"
