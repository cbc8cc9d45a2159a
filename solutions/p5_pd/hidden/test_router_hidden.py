"""Hidden: the router under deaths at every phase (placing, admitting, stepping, two of three workers),
workers that answer twice or for requests they were never given, a worker too small for a request,
a pool too full for the next request (the round stops and the queue waits), and every worker dead. Tokens against HF greedy; placements against the handout's rule worked here."""

from __future__ import annotations

import pytest
from conftest import DECODE_ENGINE, PREFILL_ENGINE, Faulty, check_tokens, hf_greedy, model_dir, random_prompts

from autograder.testing import in_worker

MAX_TOKENS = 8


@in_worker
def route(path: str, prompts: list, faults: list, engines: list | None = None, batch: int = 4) -> dict:
    """Router(prefill, decoders) with decoder i wrapped as Faulty(**faults[i]) (None: bare)."""
    from disagg import DecodeWorker, PrefillWorker, Request, Router

    engines = engines or [DECODE_ENGINE] * len(faults)
    inner = [DecodeWorker(path, **e) for e in engines]
    wrapped = [w if f is None else Faulty(w, **f) for w, f in zip(inner, faults)]
    router = Router(PrefillWorker(path, **PREFILL_ENGINE), wrapped, max_prefill_batch=batch)
    try:
        outs = router.run([Request(i, tuple(p), MAX_TOKENS, ignore_eos=True) for i, p in enumerate(prompts)])
    except RuntimeError as e:
        return {"error": str(e), "dead": sorted(router.dead)}
    return {"outputs": {rid: list(o.token_ids) for rid, o in outs.items()}, "log": [list(x) for x in router.log],
            "prefills": dict(router.prefills), "dead": sorted(router.dead),
            "after": [getattr(w, "after", 0) for w in wrapped], "refused": [getattr(w, "refused", 0) for w in wrapped],
            "used": [w.llm.block_manager.num_used_blocks for i, w in enumerate(inner) if i not in router.dead]}


def check(result: dict, prompts: list, tol, case: str) -> None:
    assert "error" not in result, f"{case}: the router raised {result.get('error')!r}"
    assert sorted(result["outputs"]) == list(range(len(prompts))), f"{case}: outputs for {sorted(result['outputs'])}"
    for rid, p in enumerate(prompts):
        want, gaps = hf_greedy(tuple(p), MAX_TOKENS, ignore_eos=True)
        check_tokens(result["outputs"][rid], want, gaps, tol("greedy near-tie")["atol"], f"{case}, request {rid}")
    assert not any(result["after"]), f"{case}: calls to a dead worker after its death: {result['after']}"
    assert not any(result["used"]), f"{case}: blocks still held by live workers at the end: {result['used']}"


PROMPTS = random_prompts(51, [6, 25, 3, 14, 9, 30])


@pytest.mark.points(2)
@pytest.mark.parametrize("die_at,moved,batch", [
    # round 1 places 0 -> w0, 1 -> w1, 2 -> w0, 3 -> w1 (least loaded, ties to the lower index)
    (("reserve", 2), [], 4),          # dies reserving request 3: 1 and 3 are placed again before the prefill
    (("admit", 1), [1, 3, 5], 6),     # dies admitting request 1: messages 3 and 5 are for the dead worker,
                                      # 2 and 4 (after them) for worker 0 must still be admitted
    (("admit", 2), [1, 3], 4),        # dies admitting request 3: 1 was admitted there already, 3 was coming
    (("step", 1), [1, 3], 4),         # dies in the round's step, holding both
])
def test_hidden_deaths_in_each_phase(die_at, moved, batch, tol):
    result = route(model_dir(), PROMPTS, [None, dict(die_at=die_at)], batch=batch)
    check(result, PROMPTS, tol, f"worker 1 dies at {die_at[0]} #{die_at[1]}")
    twice = sorted(r for r, n in result["prefills"].items() if n > 1)
    assert twice == moved, f"dies at {die_at}: prefilled twice {twice}, want {moved}"
    assert all(n <= 2 for n in result["prefills"].values()), f"prefills per request: {result['prefills']}"
    assert result["dead"] == [1]


@pytest.mark.points(2)
def test_hidden_requeued_requests_go_first_in_submission_order(tol):
    """Two requests a round. Round 1: 0 -> w0, 1 -> w1; round 2: 2 -> w0 (loads 1, 1), 3 -> w1 (2, 1);
    w1 dies in its 2nd step holding 1 and 3 (8 tokens need 7 steps) while 4 and 5 wait: round 3 must
    place 1 and 3, in that order, before 4 and 5."""
    result = route(model_dir(), PROMPTS, [None, dict(die_at=("step", 2))], batch=2)
    check(result, PROMPTS, tol, "a death with requests queued")
    want = [[0, 0], [1, 1], [2, 0], [3, 1], [1, 0], [3, 0], [4, 0], [5, 0]]
    assert result["log"] == want, f"placements (request, worker) {result['log']}, want {want}"


@pytest.mark.points(2)
def test_hidden_two_of_three_workers_die(tol):
    result = route(model_dir(), PROMPTS, [dict(die_at=("step", 2)), None, dict(die_at=("admit", 2))])
    check(result, PROMPTS, tol, "workers 0 and 2 die")
    assert result["dead"] == [0, 2]
    assert all(w == 1 for _, w in result["log"][-3:]), f"after both deaths every placement must go to worker 1: {result['log']}"


@pytest.mark.points(2)
def test_hidden_echoed_and_foreign_outputs_count_once(tol):
    result = route(model_dir(), PROMPTS, [dict(echo=len(PROMPTS)), None])
    check(result, PROMPTS, tol, "a worker that repeats its outputs")
    assert 999 not in result["outputs"], "an output for a request the router never sent was accepted"


@pytest.mark.points(2)
def test_hidden_a_worker_too_small_is_passed_over(tol):
    """Worker 0 holds 8 blocks of 4, max_model_len 32; can_reserve asks for the whole prompt + 8
    tokens in free blocks, reserve takes the prompt's blocks. The least-loaded rule applies among
    the workers that can take the request."""
    prompts = random_prompts(52, [6, 25, 3, 14, 20, 5])
    small = {**DECODE_ENGINE, "num_kv_blocks": 8, "max_model_len": 32}
    result = route(model_dir(), prompts, [None, None], engines=[small, DECODE_ENGINE], batch=6)
    check(result, prompts, tol, "a small worker 0")
    where = dict((rid, w) for rid, w in result["log"])
    # 0: 14 tokens = 4 blocks <= 8 free, loads 0,0 -> w0 (takes 2 blocks, 6 free); 1: 33 > 32 -> w1;
    # 2: 3 blocks <= 6, loads 1,1 -> w0 (takes 1, 5 free); 3: 6 blocks > 5 -> w1; 4: 7 blocks > 5 ->
    # w1 although the loads tie at 2,2; 5: 4 blocks <= 5, loads 2,3 -> w0
    assert where == {0: 0, 1: 1, 2: 0, 3: 1, 4: 1, 5: 0}, f"placements {where}"


@pytest.mark.points(2)
def test_hidden_a_full_pool_stops_the_round_and_the_queue_waits(tol):
    """Two workers of 10 blocks of 4 (max_model_len 40); each request needs ceil((prompt + 8) / 4)
    free blocks (4, 9, 3, 6, 5, 7 here), so after the first three or four placements no worker can
    take the next one: the round must stop there (not ask again, not skip ahead), decode, and place
    the rest in later rounds as blocks come free, in submission order, each prefilled once."""
    prompts = random_prompts(53, [6, 25, 3, 14, 9, 20])
    tight = {**DECODE_ENGINE, "num_kv_blocks": 10, "max_model_len": 40}
    patient = dict(patience=2000)  # far more than a correct run asks (about 3 a round)
    result = route(model_dir(), prompts, [patient, patient], engines=[tight, tight], batch=6)
    check(result, prompts, tol, "a full pool")
    assert sum(result["refused"]) > 0, ("no worker ever answered can_reserve with False, although both were "
                                       f"full: placements {result['log']}")
    order = [rid for rid, _ in result["log"]]
    assert order == list(range(len(prompts))), f"placement order {order}: the queue must wait, in submission order"
    assert result["prefills"] == {r: 1 for r in range(len(prompts))}, f"prefills per request: {result['prefills']}"


@pytest.mark.points(1)
def test_hidden_every_worker_dead_raises():
    result = route(model_dir(), PROMPTS, [dict(die_at=("step", 1)), dict(die_at=("step", 1))])
    assert "error" in result, "every decode worker died and the router returned without raising RuntimeError"
    assert result["dead"] == [0, 1]
