"""Hidden: three processes with a decode-side prefix hit. One request a round: request 0 goes to rank 1,
request 1 to rank 2, request 2 (sharing 17 of request 0's 20 tokens) to rank 1 again (loads tie at
1, 1), which holds 16 of its tokens (four blocks of 4): only positions 16..19 may cross."""

from __future__ import annotations

import pytest
import torch
from conftest import (
    DECODE_ENGINE,
    check_tokens,
    hf_continue,
    hf_greedy,
    hf_prompt_kv,
    model_dir,
    random_prompts,
)
from rank_programs import serve_rank

MAX_TOKENS = 8
BYTES_PER_TOKEN = 2 * 5 * 2 * 64 * 4  # K and V, 5 layers, 2 KV heads, head_dim 64, fp32


@pytest.mark.points(4)
@pytest.mark.world_size(3)
def test_hidden_a_prefix_hit_on_a_decode_rank_moves_only_the_missing_positions(ranks, tol):
    a, b = random_prompts(61, [20, 9])
    c = a[:17] + random_prompts(62, [3])[0]
    prompts = [a, b, c]
    results = ranks.run(serve_rank, model_dir(), prompts, MAX_TOKENS, 1)
    head = results[0]
    for rid, p in enumerate(prompts):
        want, gaps = hf_greedy(tuple(p), MAX_TOKENS, ignore_eos=True)
        check_tokens(head["outputs"][rid], want, gaps, tol("greedy near-tie")["atol"], f"request {rid}")
    assert head["log"] == [[0, 0], [1, 1], [2, 0]], f"placements {head['log']}, want [[0, 0], [1, 1], [2, 0]]"
    sends = head["float_sends"]
    want_kv = [(1, hf_prompt_kv(a)), (2, hf_prompt_kv(b)), (1, hf_prompt_kv(c)[:, :, 16:])]
    sizes = [t.numel() for _, t in sends]
    assert sizes == [w.numel() for _, w in want_kv], (
        f"float32 sends of {[s * 4 for s in sizes]} bytes; want {[w.numel() * 4 for _, w in want_kv]} "
        f"(prompts of 20 and 9 tokens, then positions 16..19 of request 2)")
    for i, ((peer, got), (rank, want)) in enumerate(zip(sends, want_kv)):
        assert peer == rank, f"send {i} went to rank {peer}, want {rank}"
        torch.testing.assert_close(got.reshape(want.shape), want, **tol("kv, fp32"), msg=lambda m, i=i: f"send {i}: {m}")
    assert [r["counters"]["kv_bytes_received"] for r in results[1:]] == [24 * BYTES_PER_TOKEN, 9 * BYTES_PER_TOKEN]


def refused_then_served(path: str, prompt: list, kv: torch.Tensor) -> dict:
    """Rank 0 drives rank 1's decode loop through a RemoteDecoder: a message with the wrong start,
    then the right one, then steps until the request ends; rank 1 serves."""
    import torch.distributed as dist
    from disagg import DecodeWorker, KVMessage, RemoteDecoder, serve_decode

    torch.set_num_threads(1)
    if dist.get_rank() == 1:
        return {"counters": serve_decode(DecodeWorker(path, **DECODE_ENGINE))}
    stub = RemoteDecoder(1)
    skip = stub.reserve(4, tuple(prompt), 5, True)
    try:
        stub.admit(KVMessage(4, tuple(prompt), 7, skip + 4, kv[:, :, skip + 4:]))
        refused = "no exception"
    except ValueError:
        refused = "ValueError"
    except Exception as e:  # noqa: BLE001  reported, not raised: the test names it
        refused = type(e).__name__
    first = stub.admit(KVMessage(4, tuple(prompt), 7, skip, kv[:, :, skip:]))
    outs = []
    for _ in range(10):
        outs += [list(o.token_ids) for o in stub.step()]
    counters = stub.stop()
    return {"skip": skip, "refused": refused, "first": first is None, "outs": outs, "counters": counters}


@pytest.mark.points(2)
@pytest.mark.world_size(2)
def test_hidden_a_refused_admit_is_raised_at_rank_0_and_the_loop_goes_on(ranks, tol):
    (p,) = random_prompts(63, [10])
    kv = hf_prompt_kv(tuple(p))
    head, tail = ranks.run(refused_then_served, model_dir(), list(p), kv)
    assert head["refused"] == "ValueError", f"an admit the decode rank refuses must raise ValueError at rank 0, got: {head['refused']}"
    assert head["skip"] == 0 and head["first"], "the right message after the refused one"
    assert len(head["outs"]) == 1, f"outputs after the refused message: {head['outs']}"
    want, gaps = hf_continue(kv, 7, 5, eos=None)
    check_tokens(head["outs"][0], want, gaps, tol("greedy near-tie")["atol"], "after a refused admit, over a RemoteDecoder")
    assert head["counters"] == tail["counters"] == {"kv_bytes_received": 10 * BYTES_PER_TOKEN}, \
        f"counters {head['counters']} / {tail['counters']}: only the admitted message's 10 positions count"
