"""Hidden tests of the placement simulator: seeded random traces against the judge's own model
(placement_oracle.py, written from the handout's rules with different algorithms), and small
cases aimed at the rules a simulator most easily gets wrong (exact ties, the batch cap, goodput's
every-lower-rate rule, the ranking's tie order, the least-squares intercept).

Times are compared at rel=1e-9 (abs=1e-12 near zero): both sides add the same terms, the
tolerance only forgives a different order of additions. The random models draw irregular
coefficients, so that no two event times tie by accident and a last-bit difference cannot flip a
tie rule; exact ties are tested in the hand cases and in small cases on a grid of quarters, where
every time is exact in binary.
"""

from __future__ import annotations

import random
import types

import pytest
from disagg import (
    SLO,
    LatencyModel,
    Placement,
    SimRequest,
    at_rate,
    attainment,
    best_placement,
    fit_latency_model,
    goodput,
    simulate,
)

from autograder.testing import in_the_worker, in_worker

if not in_the_worker():  # the model runs in the judge only
    import placement_oracle as oracle

REL, ABS = 1e-9, 1e-12


# ---- in the worker: the package on plain data ----------------------------------------------------
@in_worker
def sim_many(cases: list) -> list:
    """simulate() for each case [reqs, placement, model, cap]; per request [first_token_s,
    finish_s, decode_instance, ttft_s, tpot_s, index, arrival_s, output_len]."""
    out = []
    for reqs, placement, model, cap in cases:
        timings = simulate([SimRequest(*r) for r in reqs], Placement(*placement), LatencyModel(**model), cap)
        out.append([[t.first_token_s, t.finish_s, t.decode_instance, t.ttft_s, t.tpot_s, t.index, t.arrival_s,
                     t.output_len] for t in timings])
    return out


@in_worker
def sim_duck(reqs: list, placement: list, model: dict, cap: int) -> list:
    """simulate() on a trace of plain objects with the three attributes (not SimRequests)."""
    trace = [types.SimpleNamespace(arrival_s=a, prompt_len=p, output_len=o) for a, p, o in reqs]
    timings = simulate(trace, Placement(*placement), LatencyModel(**model), cap)
    return [[t.first_token_s, t.finish_s, t.decode_instance] for t in timings]


@in_worker
def sim_attainment(reqs: list, placement: list, model: dict, cap: int, slo: list) -> float:
    return attainment(simulate([SimRequest(*r) for r in reqs], Placement(*placement), LatencyModel(**model), cap),
                      SLO(*slo))


@in_worker
def goodput_of(reqs: list, placement: list, model: dict, slo: list, rates: list, cap: int, target: float) -> float:
    return goodput([SimRequest(*r) for r in reqs], Placement(*placement), LatencyModel(**model), SLO(*slo),
                   rates, cap, target)


@in_worker
def ranking(reqs: list, model: dict, slo: list, num_gpus: int, rates: list, cap: int, target: float) -> list:
    out = best_placement([SimRequest(*r) for r in reqs], LatencyModel(**model), SLO(*slo), num_gpus, rates, cap,
                         target)
    return [[r.placement.num_prefill, r.placement.num_decode, r.goodput, r.per_gpu] for r in out]


@in_worker
def rescaled_duck(reqs: list, rate: float) -> list:
    trace = [types.SimpleNamespace(arrival_s=a, prompt_len=p, output_len=o) for a, p, o in reqs]
    return [[r.arrival_s, r.prompt_len, r.output_len] for r in at_rate(trace, rate)]


@in_worker
def fitted(prefill: list, decode: list) -> list:
    m = fit_latency_model([tuple(p) for p in prefill], [tuple(p) for p in decode])
    return [m.prefill_base_s, m.prefill_per_token_s, m.decode_base_s, m.decode_per_seq_s, m.transfer_per_token_s]


@in_worker
def raises_value_error(call: str, args: list) -> str:
    """'' if the call was accepted, else the ValueError's message (another error propagates)."""
    fns = {
        "LatencyModel": lambda *a: LatencyModel(*a),
        "simulate": lambda reqs, cap: simulate([SimRequest(*r) for r in reqs], Placement(1, 1),
                                               LatencyModel(0.1, 0.0, 0.1, 0.0), cap),
        "goodput": lambda rates, target: goodput([SimRequest(0.0, 1, 2), SimRequest(1.0, 1, 2)], Placement(1, 1),
                                                 LatencyModel(0.1, 0.0, 0.1, 0.0), SLO(1.0, 1.0), rates, 4, target),
        "best_placement": lambda n: best_placement([SimRequest(0.0, 1, 2), SimRequest(1.0, 1, 2)],
                                                   LatencyModel(0.1, 0.0, 0.1, 0.0), SLO(1.0, 1.0), n, [1.0], 4),
        "at_rate": lambda reqs, rate: at_rate([SimRequest(*r) for r in reqs], rate),
    }
    try:
        fns[call](*args)
    except ValueError as e:
        return str(e) or "ValueError"
    return ""


# ---- in the judge: traces, models and the comparison ----------------------------------------------
def model(pb, pt, db, ds, tr=0.0) -> dict:
    return {"prefill_base_s": pb, "prefill_per_token_s": pt, "decode_base_s": db, "decode_per_seq_s": ds,
            "transfer_per_token_s": tr}


def random_trace(rng: random.Random, n: int, rate: float) -> list:
    """Poisson arrivals at `rate`, log-normal lengths (prompt median ~250, output median ~33,
    about one in ten a one-token request)."""
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        p = min(4096, max(1, round(rng.lognormvariate(5.5, 0.8))))
        o = 1 if rng.random() < 0.1 else min(512, max(1, round(rng.lognormvariate(3.5, 1.0))))
        out.append([t, p, o])
    return out


def random_model(rng: random.Random) -> dict:
    return model(rng.uniform(0.005, 0.03), rng.uniform(5e-5, 3e-4), rng.uniform(0.005, 0.03),
                 rng.uniform(1e-4, 2e-3), rng.choice([0.0, rng.uniform(1e-6, 5e-5)]))


def random_case(seed: int) -> list:
    rng = random.Random(seed)
    n = rng.randint(30, 200)
    return [random_trace(rng, n, rng.uniform(2.0, 30.0)), [rng.randint(1, 3), rng.randint(1, 4)],
            random_model(rng), rng.choice([1, 2, 3, 8, 64])]


def check_case(case: list, got: list, label: str) -> None:

    reqs, (num_prefill, num_decode), m, cap = case
    exp = oracle.run([tuple(r) for r in reqs], num_prefill, num_decode, m, cap)
    assert len(got) == len(reqs), f"{label}: {len(got)} timings for {len(reqs)} requests"
    for i, ((a, _, out), (first, finish, inst), row) in enumerate(zip(reqs, exp, got)):
        where = f"{label}, placement {num_prefill}:{num_decode}, cap {cap}, request {i} (arrival {a:.6f}, out {out})"
        assert row[5] == i and row[6] == pytest.approx(a, rel=REL) and row[7] == out, \
            f"{where}: timings must come back in trace order with index, arrival_s and output_len, got {row}"
        assert row[0] == pytest.approx(first, rel=REL, abs=ABS), f"{where}: first token at {row[0]!r}, expected {first!r}"
        assert row[2] == inst, f"{where}: dispatched to decode instance {row[2]}, expected {inst}"
        assert row[1] == pytest.approx(finish, rel=REL, abs=ABS), f"{where}: finished at {row[1]!r}, expected {finish!r}"
        tpot = 0.0 if out == 1 else (finish - first) / (out - 1)
        assert row[3] == pytest.approx(first - a, rel=REL, abs=ABS), f"{where}: ttft_s {row[3]!r}, expected {first - a!r}"
        assert row[4] == pytest.approx(tpot, rel=REL, abs=ABS), f"{where}: tpot_s {row[4]!r}, expected {tpot!r}"


@pytest.mark.points(3)
@pytest.mark.parametrize("seeds", [range(6), range(6, 12), range(12, 18)], ids=["seeds0-5", "seeds6-11", "seeds12-17"])
def test_random_traces_match_the_model(seeds):
    cases = [random_case(s) for s in seeds]
    for seed, case, got in zip(seeds, cases, sim_many(cases)):
        check_case(case, got, f"seed {seed}")


@pytest.mark.points(2)
def test_small_cap_and_many_decode_instances_match_the_model():
    # a busy trace: the cap binds on every instance, dispatch sees many unfinished requests
    cases = []
    for seed, cap, placement in [(101, 1, [1, 3]), (102, 2, [2, 4]), (103, 3, [3, 2]), (104, 2, [1, 1])]:
        rng = random.Random(seed)
        cases.append([random_trace(rng, 120, 40.0), placement, random_model(rng), cap])
    for seed, case, got in zip([101, 102, 103, 104], cases, sim_many(cases)):
        check_case(case, got, f"busy seed {seed}")


def tie_case(seed: int) -> list:
    """A small case on a grid of quarters: every time is a short sum of multiples of 1/4, exact in
    binary whatever the order of additions, so finishes at ready times, requests ready at step
    ends, equal loads and equal arrivals are true ties, many of them."""
    rng = random.Random(seed)
    reqs = [[rng.randint(0, 12) / rng.choice([1, 2, 4]), rng.randint(1, 4), rng.randint(1, 6)]
            for _ in range(rng.randint(1, 25))]
    m = model(rng.choice([0.0, 0.5, 1.0]), rng.choice([0.25, 0.5]), rng.choice([0.5, 1.0]),
              rng.choice([0.0, 0.25, 0.5]), rng.choice([0.0, 0.25, 0.5]))
    return [reqs, [rng.randint(1, 3), rng.randint(1, 4)], m, rng.choice([1, 2, 3, 100])]


@pytest.mark.points(2)
def test_tie_heavy_small_cases_match_the_model():
    cases = [tie_case(1000 + s) for s in range(150)]
    for s, case, got in zip(range(150), cases, sim_many(cases)):
        check_case(case, got, f"tie-heavy case {1000 + s} (requests {case[0]}, model {case[2]})")


@pytest.mark.points(1)
def test_trace_of_any_objects_in_any_order():
    # duck typing on arrival_s, prompt_len, output_len; a trace not sorted by arrival
    rng = random.Random(7)
    reqs = random_trace(rng, 40, 10.0)
    rng.shuffle(reqs)
    m, placement, cap = random_model(rng), [2, 2], 4
    got = sim_duck(reqs, placement, m, cap)

    for i, (row, exp) in enumerate(zip(got, oracle.run([tuple(r) for r in reqs], 2, 2, m, cap))):
        assert row[:2] == pytest.approx(list(exp[:2]), rel=REL) and row[2] == exp[2], \
            f"shuffled duck-typed trace, request {i}: got {row}, expected {list(exp)}"


@pytest.mark.points(2)
def test_load_counts_only_unfinished_requests_at_the_ready_time():
    # One prefill instance, 1.0 s each (no transfer); three decode instances; steps of 1.0.
    # A (out 3): ready 1 -> 0 (loads 0,0,0); steps 1->2, 2->3: done 3.
    # B (out 3): ready 2 -> 1 (loads 1,0,0); steps 2->3, 3->4: done 4.
    # C (out 2): ready 3, A finished at 3 exactly: loads 0,1,0 -> 0; step 3->4: done 4.
    # D (out 2): ready 4, B and C finished at 4: loads 0,0,0 -> 0 (not 2, the emptiest by
    #            dispatches ever, nor 2, the emptiest when finishing at 4 still counts).
    # E (out 2): ready 5, D finished at 5: loads 0,0,0 -> 0.
    reqs = [[0.0, 1, 3], [0.0, 1, 3], [0.0, 1, 2], [0.0, 1, 2], [0.0, 1, 2]]
    (got,) = sim_many([[reqs, [1, 3], model(1.0, 0.0, 1.0, 0.0), 4]])
    assert [r[2] for r in got] == [0, 1, 0, 0, 0], f"decode instances {[r[2] for r in got]}, expected [0, 1, 0, 0, 0]"
    assert [r[1] for r in got] == pytest.approx([3.0, 4.0, 4.0, 5.0, 6.0], rel=REL), f"finish times {got}"


@pytest.mark.points(2)
def test_dispatch_counts_unfinished_not_dispatched_ever():
    # Two decode instances, prefill 1.0 s each in turn, steps of 1.0, no transfer.
    # A, B, C, D (out 2): ready 1, 2, 3, 4; each finishes (2, 3, 4, 5) exactly when the next is
    # ready, so all go to 0 (loads 0, 0). E (out 5): ready 5 -> 0; 4 steps 5->9: done 9.
    # F (out 4): ready 6, E running: loads 1, 0 -> 1; steps 6->9: done 9.
    # G (t=20, out 2): ready 21, all done: loads 0, 0 -> 0 (5 dispatches ever against 1 would
    # say 1); step 21->22.
    reqs = [[0.0, 1, 2], [0.0, 1, 2], [0.0, 1, 2], [0.0, 1, 2], [0.0, 1, 5], [0.0, 1, 4], [20.0, 1, 2]]
    (got,) = sim_many([[reqs, [1, 2], model(1.0, 0.0, 1.0, 0.0), 4]])
    assert [r[2] for r in got] == [0, 0, 0, 0, 0, 1, 0], \
        f"decode instances {[r[2] for r in got]}, expected [0, 0, 0, 0, 0, 1, 0]"
    assert [r[1] for r in got] == pytest.approx([2.0, 3.0, 4.0, 5.0, 9.0, 9.0, 22.0], rel=REL), f"finish times {got}"


@pytest.mark.points(2)
def test_a_request_ready_at_a_step_end_joins_the_next_step():
    # prefill_s(p) = 0.25 + p / 16, transfer p / 8, decode_s(b) = 0.5 + b / 4; all prompts 4 tokens
    # (prefill 0.5, transfer 0.5), one instance of each.
    # A (t=0, out 3): prefill 0->0.5, ready 1.0; step 1.0->1.75 [A].
    # B (t=0.75, out 2): prefill 0.75->1.25, ready 1.75 = the end of A's step: it joins the step
    #   starting at 1.75: [A, B] 1.75->2.75; A (2 tokens) and B (1 token) done at 2.75.
    # C (t=0.75, out 2): queued behind B, prefill 1.25->1.75, ready 2.25 while the step runs:
    #   waits for its end, [C] 2.75->3.5.
    reqs = [[0.0, 4, 3], [0.75, 4, 2], [0.75, 4, 2]]
    (got,) = sim_many([[reqs, [1, 1], model(0.25, 0.0625, 0.5, 0.25, 0.125), 2]])
    assert [r[0] for r in got] == pytest.approx([0.5, 1.25, 1.75], rel=REL), f"first tokens {got}"
    assert [r[1] for r in got] == pytest.approx([2.75, 2.75, 3.5], rel=REL), f"finish times {got}"
    # TPOT: A (2.75 - 0.5) / 2, B (2.75 - 1.25) / 1, C (3.5 - 1.75) / 1: transfer and waits count
    assert [r[4] for r in got] == pytest.approx([1.125, 1.5, 1.75], rel=REL), f"TPOTs {got}"
    assert [r[3] for r in got] == pytest.approx([0.5, 0.5, 1.0], rel=REL), f"TTFTs exclude the transfer: {got}"


@pytest.mark.points(2)
def test_batch_cap_binds_and_decoding_requests_keep_their_places():
    # Two prefill instances (1.0 s each), one decode instance, steps of 1.0 (any batch), cap 2.
    # A (t=0, out 4) and B (t=0, out 3): ready 1 and 1. C (t=0.5, out 3) and D (t=0.5, out 2):
    # prefill 1->2 on both instances, ready 2 and 2.
    # 1->2 [A, B]; 2->3 [A, B] (full: C, D wait), B done 3; 3->4 [A, C], A done 4;
    # 4->5 [C, D]: both done 5.
    reqs = [[0.0, 1, 4], [0.0, 1, 3], [0.5, 1, 3], [0.5, 1, 2]]
    (got,) = sim_many([[reqs, [2, 1], model(1.0, 0.0, 1.0, 0.0), 2]])
    assert [r[1] for r in got] == pytest.approx([4.0, 3.0, 5.0, 5.0], rel=REL), f"finish times with cap 2: {got}"
    # decode_s grows with the batch: a cap of 1 runs them one after another, 0.75 s a step
    # (0.5 + 0.25): A 1->3.25 (3 steps), B 3.25->4.75, C 4.75->6.25, D 6.25->7.0
    (got,) = sim_many([[reqs, [2, 1], model(1.0, 0.0, 0.5, 0.25), 1]])
    assert [r[1] for r in got] == pytest.approx([3.25, 4.75, 6.25, 7.0], rel=REL), f"finish times with cap 1: {got}"


# A (t=0, out 21: steps of 1.0 from t=1, boundaries 1, 2, ..., 21) and B (t=d, out 2), prefill 1.0,
# no transfer. On (1, 1) B is ready at max(d, 1) + 1: on a boundary TPOT 1, half-way 1.5 > 1.2.
ALIGN = [[0.0, 8, 21], [3.0, 8, 2]]
ALIGN_MODEL = model(1.0, 0.0, 1.0, 0.0)


@pytest.mark.points(2)
def test_goodput_stops_at_the_first_failing_rate():
    # d = 1 / rate: 0.125 -> 8 (pass), 0.2 -> 5 (pass), 0.4 -> 2.5 (fail), 0.5 -> 2 (pass), 1 -> 1 (pass)
    rates = [0.5, 0.125, 1.0, 0.4, 0.2]
    assert goodput_of(ALIGN, [1, 1], ALIGN_MODEL, [10.0, 1.2], rates, 4, 0.9) == 0.2
    # target 0.5: one of two attained is enough at every rate
    assert goodput_of(ALIGN, [1, 1], ALIGN_MODEL, [10.0, 1.2], rates, 4, 0.5) == 1.0


@pytest.mark.points(2)
def test_goodput_and_attainment_match_the_model_on_a_random_trace():

    rng = random.Random(11)
    reqs = random_trace(rng, 80, 5.0)
    m = random_model(rng)
    rows = oracle.run([tuple(r) for r in reqs], 2, 2, m, 8)
    ttfts = sorted(f - a for (a, _, _), (f, _, _) in zip(reqs, rows))
    slo = [ttfts[60], 0.05]  # about 3 in 4 attain the TTFT target
    expected = oracle.attainment([tuple(r) for r in reqs], rows, tuple(slo))
    assert sim_attainment(reqs, [2, 2], m, 8, slo) == pytest.approx(expected, rel=1e-12), "attainment"
    rates = [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0]
    for target in (0.5, 0.9):
        want = oracle.goodput([tuple(r) for r in reqs], 2, 2, m, (1.0, 0.05), rates, 8, target)
        got = goodput_of(reqs, [2, 2], m, [1.0, 0.05], rates, 8, target)
        assert got == want, f"goodput at target {target}: {got}, expected {want}"


@pytest.mark.points(2)
def test_best_placement_matches_the_model_and_divides_by_gpus():

    rng = random.Random(5)
    reqs = random_trace(rng, 40, 4.0)
    m = model(0.02, 1e-4, 0.015, 1e-3, 1e-5)
    # goodputs 32 (2:2), 16 (1:2, 1:3), 8 (1:1, 2:1, 3:1): per GPU 8, 5.33, then 4 for both 1:1
    # and 1:3 (fewer GPUs first), 2.67, 2
    slo, rates = [0.5, 0.04], [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    want = oracle.best_placement([tuple(r) for r in reqs], m, tuple(slo), 4, rates, 8)
    got = ranking(reqs, m, slo, 4, rates, 8, 0.9)
    assert [r[:2] for r in got] == [list(w[:2]) for w in want], f"order {got}, expected {want}"
    assert [r[2] for r in got] == [w[2] for w in want], f"goodputs {got}, expected {want}"
    assert [r[3] for r in got] == pytest.approx([w[3] for w in want], rel=REL), f"per-GPU goodputs {got}"
    # every goodput 0 (a TTFT target below any prefill): the tie order alone, for 5 GPUs
    got = ranking(reqs, m, [0.001, 0.03], 5, rates, 8, 0.9)
    order = [[1, 1], [2, 1], [1, 2], [3, 1], [2, 2], [1, 3], [4, 1], [3, 2], [2, 3], [1, 4]]
    assert [r[:2] for r in got] == order, f"tie order {[r[:2] for r in got]}, expected {order}"


@pytest.mark.points(2)
def test_fit_latency_model_is_ordinary_least_squares_with_intercept():

    rng = random.Random(3)
    prefill = [[x, 0.012 + 2.5e-4 * x + rng.gauss(0, 1e-3)] for x in (64, 128, 256, 512, 1024, 2048, 128, 512)]
    decode = [[b, 0.008 + 6e-4 * b + rng.gauss(0, 2e-4)] for b in (1, 2, 4, 8, 16, 32, 64)]
    want = [*oracle.fit_line(prefill), *oracle.fit_line(decode), 0.0]
    assert fitted(prefill, decode) == pytest.approx(want, rel=1e-9, abs=1e-15), f"noisy fit, expected {want}"
    # a large intercept: a line through the origin would miss it (slope 0.5 x + 3 through the origin
    # fits slope ~0.5 + 3 * sum(x) / sum(x^2))
    assert fitted([[1, 3.5], [2, 4.0], [3, 4.5]], [[1, 2.0], [3, 2.0], [5, 2.0]]) == \
        pytest.approx([3.0, 0.5, 2.0, 0.0, 0.0], rel=1e-9, abs=1e-12)


@pytest.mark.points(1)
def test_at_rate_shifts_and_scales_any_trace():
    # arrivals 4, 2, 10, 6 (not sorted, earliest 2): (a - 2) * (4 - 1) / (3 * (10 - 2)) = (a - 2) / 8
    got = rescaled_duck([[4.0, 5, 1], [2.0, 6, 2], [10.0, 7, 3], [6.0, 8, 4]], 3.0)
    assert [r[0] for r in got] == pytest.approx([0.25, 0.0, 1.0, 0.5], rel=1e-12, abs=1e-15), f"at_rate: {got}"
    assert [r[1:] for r in got] == [[5, 1], [6, 2], [7, 3], [8, 4]]


@pytest.mark.points(2)
def test_invalid_arguments_raise_value_error_and_valid_ones_do_not():
    ok = raises_value_error
    for k, name in enumerate(["prefill_base_s", "prefill_per_token_s", "decode_base_s", "decode_per_seq_s",
                              "transfer_per_token_s"]):
        args = [0.1, 0.1, 0.1, 0.1, 0.0]
        assert ok("LatencyModel", args) == ""
        args[k] = -0.5
        assert name in ok("LatencyModel", args), f"LatencyModel with {name} = -0.5 must raise, naming it"
    assert ok("LatencyModel", [0.0, 0.0, 0.1, 0.0]) != "", "a prefill that takes no time must raise"
    assert ok("LatencyModel", [0.1, 0.0, 0.0, 0.0]) != "", "a decode step that takes no time must raise"
    assert ok("simulate", [[[0.0, 1, 2]], 1]) == "" and ok("simulate", [[[0.0, 1, 2]], 0]) != ""
    assert ok("goodput", [[1.0], 0.9]) == "" and ok("goodput", [[], 0.9]) != ""
    assert ok("goodput", [[1.0], 1.0]) == "" and ok("goodput", [[1.0], 0.0]) != "" and ok("goodput", [[1.0], 1.5]) != ""
    assert ok("best_placement", [2]) == "" and ok("best_placement", [1]) != ""
    assert ok("at_rate", [[[0.0, 1, 1], [1.0, 1, 1]], 1.0]) == ""
    for bad in ([[[0.0, 1, 1], [1.0, 1, 1]], 0.0], [[[0.0, 1, 1], [1.0, 1, 1]], -1.0], [[[0.5, 1, 1]], 1.0],
                [[[0.5, 1, 1], [0.5, 2, 2], [0.5, 3, 3]], 1.0]):
        assert ok("at_rate", bad) != "", f"at_rate{tuple(bad)} must raise ValueError"
