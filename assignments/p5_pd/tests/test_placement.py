"""The placement simulator worked by hand: prefill queueing, least-loaded dispatch, decode steps
and their batch cap, attainment, rate scaling, goodput and the placement search.

Every case uses times that are exact in binary (halves, quarters, eighths), so a tie in the rules
(a finish exactly at a ready time, a request ready exactly at a step's end) is a true tie.
Times are compared at rel=1e-9: the sums below are exact, the tolerance only forgives a different
order of additions.
"""

from __future__ import annotations

import pytest
from disagg import (
    SLO,
    LatencyModel,
    Placement,
    RequestTiming,
    SimRequest,
    at_rate,
    attainment,
    best_placement,
    fit_latency_model,
    goodput,
    simulate,
)

from autograder.testing import in_worker


@in_worker
def sim(reqs: list, placement: list, model: dict, cap: int) -> list:
    """simulate() on plain data; per request [first_token_s, finish_s, decode_instance, ttft_s,
    tpot_s, index] (the last three read from the package's RequestTiming)."""
    trace = [SimRequest(*r) for r in reqs]
    out = simulate(trace, Placement(*placement), LatencyModel(**model), cap)
    return [[t.first_token_s, t.finish_s, t.decode_instance, t.ttft_s, t.tpot_s, t.index] for t in out]


def model(pb, pt, db, ds, tr=0.0) -> dict:
    return {"prefill_base_s": pb, "prefill_per_token_s": pt, "decode_base_s": db, "decode_per_seq_s": ds,
            "transfer_per_token_s": tr}


def column(rows: list, k: int) -> list:
    return [r[k] for r in rows]


@pytest.mark.points(2)
def test_prefill_is_fcfs_on_the_earliest_free_instance():
    # prefill_s(p) = p / 4; every request is one token, so it finishes at its first token.
    # Trace order r0..r3; arrival order r0 (0), r1 (0.5, index 1), r3 (0.5, index 3), r2 (1.0).
    reqs = [[0.0, 8, 1], [0.5, 4, 1], [1.0, 4, 1], [0.5, 2, 1]]
    m = model(0.0, 0.25, 1.0, 0.0)
    one = sim(reqs, [1, 1], m, 4)
    # one instance: r0 0->2, r1 2->3, r3 3->3.5, r2 3.5->4.5
    assert column(one, 0) == pytest.approx([2.0, 3.0, 4.5, 3.5], rel=1e-9), f"one prefill instance: {one}"
    assert column(one, 3) == pytest.approx([2.0, 2.5, 3.5, 3.0], rel=1e-9), "TTFT = first token - arrival"
    # two instances: r0 on 0 (0->2), r1 on 1 (0.5->1.5), r3 on 1, free first (1.5->2.0),
    # r2 arrives at 1.0, both busy until 2.0: 2.0->3.0
    two = sim(reqs, [2, 1], m, 4)
    assert column(two, 0) == pytest.approx([2.0, 1.5, 3.0, 2.0], rel=1e-9), f"two prefill instances: {two}"
    assert column(two, 5) == [0, 1, 2, 3], "timings come back in trace order"


@pytest.mark.points(1)
def test_one_token_request_never_reaches_decode():
    # prefill_s = 1.0: finished at its first token, no decode instance, TPOT 0.0
    (row,) = sim([[0.25, 16, 1]], [1, 2], model(1.0, 0.0, 1.0, 0.0, 0.5), 4)
    assert row[:2] == pytest.approx([1.25, 1.25], rel=1e-9) and row[2] is None, f"one-token request: {row}"
    assert row[4] == 0.0, f"TPOT of a one-token request is 0.0, got {row[4]}"


@pytest.mark.points(2)
def test_ttft_excludes_transfer_and_a_request_ready_at_a_step_end_joins_the_next_step():
    # prefill_s = 1.0, decode_s(b) = 1.0 + 0.5 b, transfer 0.125 s/token, one instance of each.
    # A (t=0, p=8, out=3): prefill 0->1, ready 1 + 8/8 = 2; step 2->3.5 alone (decode_s(1) = 1.5).
    # B (t=2, p=4, out=3): prefill 2->3, ready 3 + 4/8 = 3.5 = the end of A's step, so B joins
    # the step starting at 3.5: [A, B] 3.5->5.5 (decode_s(2) = 2.0); A has its 2 tokens: done 5.5.
    # B alone 5.5->7.0. TTFT: A 1 - 0 = 1, B 3 - 2 = 1 (the transfer is not in them).
    # TPOT: A (5.5 - 1) / 2 = 2.25, B (7 - 3) / 2 = 2.0 (the transfer and the wait are).
    rows = sim([[0.0, 8, 3], [2.0, 4, 3]], [1, 1], model(1.0, 0.0, 1.0, 0.5, 0.125), 4)
    assert column(rows, 0) == pytest.approx([1.0, 3.0], rel=1e-9), f"first tokens: {rows}"
    assert column(rows, 3) == pytest.approx([1.0, 1.0], rel=1e-9), f"TTFT must exclude the transfer: {rows}"
    assert column(rows, 1) == pytest.approx([5.5, 7.0], rel=1e-9), f"finish times: {rows}"
    assert column(rows, 4) == pytest.approx([2.25, 2.0], rel=1e-9), f"TPOT = (finish - first) / (out - 1): {rows}"
    assert column(rows, 2) == [0, 0]


@pytest.mark.points(2)
def test_dispatch_goes_to_the_fewest_unfinished_requests():
    # One prefill instance (1.0 s each), two decode instances, decode steps of 1.0, no transfer.
    # A (out 2): ready 1, loads [0, 0] -> 0; step 1->2: done 2.
    # B (out 3): ready 2, A finished exactly at 2 so it no longer counts: loads [0, 0] -> 0;
    #            steps 2->3, 3->4: done 4.
    # C (out 2): ready 3, B unfinished on 0: loads [1, 0] -> 1; step 3->4: done 4.
    # D (out 2): ready 4, B and C both finished at 4: loads [0, 0] -> 0; step 4->5: done 5.
    rows = sim([[0.0, 1, 2], [0.0, 1, 3], [0.0, 1, 2], [0.0, 1, 2]], [1, 2], model(1.0, 0.0, 1.0, 0.0), 4)
    assert column(rows, 2) == [0, 0, 1, 0], f"decode instances: {column(rows, 2)}"
    assert column(rows, 1) == pytest.approx([2.0, 4.0, 4.0, 5.0], rel=1e-9), f"finish times: {rows}"


@pytest.mark.points(2)
def test_batch_cap_keeps_decoding_requests_first():
    # Prefill 1.0 s each on one instance, decode steps of 1.0 (any batch), cap 2.
    # A (out 4): ready 1; B (out 4): ready 2; C (out 2): ready 3.
    # 1->2 [A]; 2->3 [A, B]; 3->4 [A, B] (full: C waits); A has 3 tokens: done 4.
    # 4->5 [B, C]: B's third token and C's only one: both done 5.
    rows = sim([[0.0, 1, 4], [0.0, 1, 4], [0.0, 1, 2]], [1, 1], model(1.0, 0.0, 1.0, 0.0), 2)
    assert column(rows, 1) == pytest.approx([4.0, 5.0, 5.0], rel=1e-9), f"finish times with cap 2: {rows}"
    # without the cap binding (cap 4): 3->4 [A, B, C] -> C done at 4
    rows = sim([[0.0, 1, 4], [0.0, 1, 4], [0.0, 1, 2]], [1, 1], model(1.0, 0.0, 1.0, 0.0), 4)
    assert column(rows, 1) == pytest.approx([4.0, 5.0, 4.0], rel=1e-9), f"finish times with cap 4: {rows}"


@in_worker
def attained(rows: list, slo: list) -> float:
    return attainment([RequestTiming(*r) for r in rows], SLO(*slo))


@in_worker
def rescaled(reqs: list, rate: float) -> list:
    return [[r.arrival_s, r.prompt_len, r.output_len] for r in at_rate([SimRequest(*r) for r in reqs], rate)]


@pytest.mark.points(2)
def test_attainment_and_rate_scaling():
    rows = [[0, 0.0, 1.0, 5.0, 5, 0],      # TTFT 1, TPOT (5 - 1) / 4 = 1
            [1, 1.0, 1.5, 1.5, 1, None],   # TTFT 0.5, one token
            [2, 0.0, 2.0, 3.0, 2, 1],      # TTFT 2, TPOT 1
            [3, 0.0, 0.5, 6.5, 3, 0]]      # TTFT 0.5, TPOT 3
    # SLO (1, 1): r0 (both equal to the SLO: attained), r1 -> 2 of 4
    assert attained(rows, [1.0, 1.0]) == pytest.approx(0.5, rel=1e-12)
    # SLO (2, 0.5): only r1 (TPOT of r0, r2, r3 too slow) -> 1 of 4
    assert attained(rows, [2.0, 0.5]) == pytest.approx(0.25, rel=1e-12)
    with pytest.raises(ValueError):
        attained([], [1.0, 1.0])
    # arrivals 1, 3, 2, 5 at 2 req/s: (a - 1) * (4 - 1) / (2 * (5 - 1)) = (a - 1) * 0.375
    got = rescaled([[1.0, 10, 2], [3.0, 20, 3], [2.0, 30, 4], [5.0, 40, 5]], 2.0)
    assert column(got, 0) == pytest.approx([0.0, 0.75, 0.375, 1.5], rel=1e-9, abs=1e-12), f"at_rate: {got}"
    assert [r[1:] for r in got] == [[10, 2], [20, 3], [30, 4], [40, 5]]
    for bad in ([[1.0, 10, 2]], [[1.0, 10, 2], [1.0, 10, 2]]):  # one request; all at once
        with pytest.raises(ValueError):
            rescaled(bad, 2.0)


# A: t=0, out 11 (10 decode steps of 1.0 from t=1: boundaries at 1, 2, ..., 11); B: t=d, out 2.
# Prefill 1.0 s, decode steps of 1.0 s, no transfer. On (1, 1), B is ready at max(d, 1) + 1: on a
# step boundary it decodes at once (TPOT 1), half-way it waits 0.5 (TPOT 1.5 > 1.2: not attained).
# at_rate of two requests puts B at d = 1 / rate.
ALIGN = [[0.0, 8, 11], [1.0, 8, 2]]
ALIGN_MODEL = model(1.0, 0.0, 1.0, 0.0)
RATES = [1.0, 0.25, 0.5, 0.4]  # any order: taken ascending


@in_worker
def goodput_of(reqs: list, placement: list, m: dict, slo: list, rates: list, cap: int) -> float:
    return goodput([SimRequest(*r) for r in reqs], Placement(*placement), LatencyModel(**m), SLO(*slo), rates, cap)


@in_worker
def ranking(reqs: list, m: dict, slo: list, num_gpus: int, rates: list, cap: int) -> list:
    out = best_placement([SimRequest(*r) for r in reqs], LatencyModel(**m), SLO(*slo), num_gpus, rates, cap)
    return [[r.placement.num_prefill, r.placement.num_decode, r.goodput, r.per_gpu] for r in out]


@pytest.mark.points(2)
def test_goodput_needs_every_lower_rate_to_pass():
    # rate 0.25: d = 4, ready 5 (boundary) pass; 0.4: d = 2.5, ready 3.5 fail; 0.5: d = 2, ready 3
    # pass; 1.0: d = 1, ready 2 pass. 1 of 2 attained < 0.9 fails: goodput 0.25 (not 1.0).
    assert goodput_of(ALIGN, [1, 1], ALIGN_MODEL, [10.0, 1.2], RATES, 4) == 0.25
    # without 0.25 the lowest rate fails: 0.0
    assert goodput_of(ALIGN, [1, 1], ALIGN_MODEL, [10.0, 1.2], [0.4, 0.5, 1.0], 4) == 0.0


@pytest.mark.points(2)
def test_best_placement_ranks_per_gpu_goodput():
    # (1, 2): B goes to the idle decode instance and decodes at once: every rate passes, 1.0 / 3.
    # (1, 1): 0.25 / 2 = 0.125. (2, 1): B prefills at d on instance 1, ready d + 1: 2.5 -> 3.5
    # fails at 0.4: 0.25 / 3.
    got = ranking(ALIGN, ALIGN_MODEL, [10.0, 1.2], 3, RATES, 4)
    assert [r[:2] for r in got] == [[1, 2], [1, 1], [2, 1]], f"order: {got}"
    assert column(got, 2) == [1.0, 0.25, 0.25], f"goodputs: {got}"
    assert column(got, 3) == pytest.approx([1 / 3, 0.125, 0.25 / 3], rel=1e-9), f"per-GPU goodputs: {got}"
    # a TTFT SLO below any prefill: every goodput 0.0, so the ties order them: fewer GPUs first,
    # then more prefill instances first
    got = ranking(ALIGN, ALIGN_MODEL, [0.5, 1.2], 4, RATES, 4)
    assert [r[:2] for r in got] == [[1, 1], [2, 1], [1, 2], [3, 1], [2, 2], [1, 3]], f"tie order: {got}"


@in_worker
def fitted(prefill: list, decode: list) -> list:
    m = fit_latency_model([tuple(p) for p in prefill], [tuple(p) for p in decode], 0.5)
    return [m.prefill_base_s, m.prefill_per_token_s, m.decode_base_s, m.decode_per_seq_s, m.transfer_per_token_s]


@in_worker
def invalid(kind: str, args: list) -> str:
    """The ValueError's message for constructing `kind` from args, or '' if it was accepted."""
    cls = {"LatencyModel": LatencyModel, "Placement": Placement, "SLO": SLO, "SimRequest": SimRequest}[kind]
    try:
        cls(*args)
    except ValueError as e:
        return str(e) or "ValueError"
    return ""


@pytest.mark.points(2)
def test_fit_latency_model_and_validation():
    # prefill y = 0.5 + 0.25 x, decode y = 0.125 + 0.0625 b: exact lines give their coefficients
    got = fitted([[1, 0.75], [2, 1.0], [3, 1.25], [4, 1.5]], [[1, 0.1875], [2, 0.25], [4, 0.375], [8, 0.625]])
    assert got == pytest.approx([0.5, 0.25, 0.125, 0.0625, 0.5], rel=1e-9), f"fitted: {got}"
    # a falling prefill line (slope -0.5, intercept 2.5) and a negative decode intercept
    # (slope 2, intercept -1): clipped to 0
    got = fitted([[1, 2.0], [3, 1.0]], [[1, 1.0], [2, 3.0]])
    assert got == pytest.approx([2.5, 0.0, 0.0, 2.0, 0.5], rel=1e-9, abs=1e-12), f"clipped: {got}"
    with pytest.raises(ValueError):
        fitted([[4, 1.0], [4, 2.0]], [[1, 1.0], [2, 3.0]])  # one distinct prompt length
    assert invalid("LatencyModel", [0.1, 0.0, 0.1, 0.0]) == ""
    assert "decode_per_seq_s" in invalid("LatencyModel", [0.1, 0.0, 0.1, -1.0])
    assert invalid("Placement", [1, 1]) == "" and "num_decode" in invalid("Placement", [1, 0])
    assert invalid("SLO", [0.5, 0.1]) == "" and "tpot_s" in invalid("SLO", [0.5, 0.0])
    assert invalid("SimRequest", [0.0, 1, 1]) == "" and "prompt_len" in invalid("SimRequest", [0.0, 0, 1])
