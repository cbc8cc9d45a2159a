"""Hidden: KV moves at odd sizes and offsets, long prompts prefilled in chunks, prefix hits across block
sizes, requests that end at their first token, and a decode worker's bookkeeping (validation keeps the
reservation, an abort frees everything). Oracles: a per-token loop here, HF on the same weights."""

from __future__ import annotations

import pytest
import torch
from conftest import (
    DECODE_ENGINE,
    EOS,
    PREFILL_ENGINE,
    check_tokens,
    hf_continue,
    hf_greedy,
    hf_prompt_kv,
    model_dir,
    random_prompts,
)
from disagg import DecodeWorker, KVMessage, PrefillRequest, PrefillWorker, gather_kv, kv_bytes, scatter_kv

from autograder.testing import in_worker

L, H, D = 2, 3, 5


def pool(num_blocks: int, block_size: int, layout: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (L, 2, num_blocks, block_size, H, D) if layout == "NHD" else (L, 2, num_blocks, H, block_size, D)
    return torch.randn(shape, generator=g)


def token_kv(cache: torch.Tensor, table: list[int], pos: int, layout: str) -> torch.Tensor:
    bs = cache.shape[3] if layout == "NHD" else cache.shape[4]
    block, off = table[pos // bs], pos % bs
    return cache[:, :, block, off] if layout == "NHD" else cache[:, :, block, :, off]


@pytest.mark.points(2)
@pytest.mark.parametrize("src_bs,dst_bs,src_layout,dst_layout,start,end", [
    (1, 8, "HND", "NHD", 0, 5),     # one token a block on one side, a partial block on the other
    (8, 2, "NHD", "HND", 5, 19),    # from mid-block to mid-block, a partial block at each end
    (4, 4, "HND", "HND", 7, 8),     # one token
    (2, 16, "NHD", "NHD", 3, 33),   # more than one destination block, the last one partial
])
def test_hidden_moves_at_odd_sizes_and_offsets(src_bs, dst_bs, src_layout, dst_layout, start, end):
    src = pool(40, src_bs, src_layout, seed=src_bs)
    src_table = torch.randperm(40, generator=torch.Generator().manual_seed(7))[: -(-end // src_bs)].tolist()
    dst = pool(30, dst_bs, dst_layout, seed=100 + dst_bs)
    before = dst.clone()
    dst_table = torch.randperm(30, generator=torch.Generator().manual_seed(8))[: -(-end // dst_bs)].tolist()
    kv = gather_kv(src, src_table, start, end, src_layout)
    assert tuple(kv.shape) == (L, 2, end - start, H, D), f"gather of {start}..{end - 1}: shape {tuple(kv.shape)}"
    scatter_kv(dst, dst_table, start, kv, dst_layout)
    for p in range(start, end):
        torch.testing.assert_close(token_kv(dst, dst_table, p, dst_layout), token_kv(src, src_table, p, src_layout), rtol=0, atol=0,
                                   msg=lambda m, p=p: f"position {p} ({src_bs}/{src_layout} -> {dst_bs}/{dst_layout}): {m}")
    changed = (dst != before).flatten(0, 1).reshape(L * 2, 30, -1).any(dim=(0, 2)).nonzero().flatten().tolist()
    allowed = {dst_table[p // dst_bs] for p in range(start, end)}
    assert set(changed) <= allowed, f"blocks {sorted(set(changed) - allowed)} changed but hold none of positions {start}..{end - 1}"


@pytest.mark.points(1)
def test_hidden_kv_bytes_of_other_shapes():
    assert kv_bytes(1, 32, 8, 128, torch.bfloat16) == 131072  # LLaMA-3-8B: 2 x 32 x 8 x 128 x 2 B = 128 KiB a token
    assert kv_bytes(3, 1, 1, 1, torch.float32) == 24


@pytest.mark.points(3)
def test_hidden_long_prompts_prefilled_in_chunks_send_all_their_kv(tol):
    """A token budget of 24 a step: a 70-token prompt takes three steps, four prompts share them."""
    prompts = random_prompts(41, [70, 2, 45, 24])
    worker = PrefillWorker(model_dir(), **{**PREFILL_ENGINE, "max_num_batched_tokens": 24, "max_num_seqs": 4})
    messages = worker.prefill([PrefillRequest(10 + i, p, skip) for i, (p, skip) in enumerate(zip(prompts, [16, 0, 32, 0]))])
    for i, (p, skip, m) in enumerate(zip(prompts, [16, 0, 32, 0], messages)):
        assert m.request_id == 10 + i and m.start == skip, f"message {i}: request {m.request_id}, start {m.start}"
        torch.testing.assert_close(m.kv, hf_prompt_kv(p)[:, :, skip:], **tol("kv, fp32"),
                                   msg=lambda s, i=i: f"prompt {i} ({len(prompts[i])} tokens, from {[16, 0, 32, 0][i]}): {s}")
        want, gaps = hf_greedy(p, 1, ignore_eos=True)
        check_tokens([m.first_token], want, gaps, tol("greedy near-tie")["atol"], f"prompt {i}: first token")
    assert worker.num_prefills == 4 and worker.kv_bytes_sent == sum(m.kv.numel() * 4 for m in messages)
    assert worker.llm.block_manager.num_used_blocks == 0, "blocks still held after the prefills"
    again = worker.prefill([PrefillRequest(0, prompts[0])])[0]  # a prefill-side prefix hit: still the whole KV
    torch.testing.assert_close(again.kv, hf_prompt_kv(prompts[0]), **tol("kv, fp32"), msg=lambda s: f"a prompt prefilled twice: {s}")


@pytest.mark.points(2)
def test_hidden_prefix_hit_across_block_sizes(tol):
    """Decode block size 8: a shared prefix of 19 tokens is 2 full blocks there (16 tokens)."""
    shared = random_prompts(42, [19])[0]
    a, b = shared + random_prompts(43, [9])[0], shared + random_prompts(44, [4])[0]
    pw = PrefillWorker(model_dir(), **PREFILL_ENGINE)
    dw = DecodeWorker(model_dir(), **{**DECODE_ENGINE, "block_size": 8, "num_kv_blocks": 64})
    dw.reserve(0, a, 3, True)
    dw.admit(pw.prefill([PrefillRequest(0, a)])[0])
    while dw.load:
        dw.step()
    skip = dw.reserve(1, b, 5, True)
    assert skip == 16, f"reserve after a 28-token prompt sharing 19 tokens: {skip} tokens held, want 16 (two blocks of 8)"
    (m,) = pw.prefill([PrefillRequest(1, b, skip)])
    assert m.kv.shape[2] == len(b) - 16 and dw.admit(m) is None
    outs = []
    while dw.load:
        outs += dw.step()
    want, gaps = hf_greedy(b, 5, ignore_eos=True)
    check_tokens(outs[0].token_ids, want, gaps, tol("greedy near-tie")["atol"], "after a prefix hit at block size 8")


@pytest.mark.points(2)
def test_hidden_requests_that_end_at_the_first_token(tol):
    dw = DecodeWorker(model_dir(), **DECODE_ENGINE)
    (p,) = random_prompts(45, [6])
    kv = hf_prompt_kv(p)
    dw.reserve(1, p, 4, False)
    out = dw.admit(KVMessage(1, p, EOS, 0, kv))
    assert out is not None and tuple(out.token_ids) == (EOS,) and out.finish_reason == "stop", f"first token EOS: {out}"
    skip = dw.reserve(2, p, 1, True)  # request 1's full block is cached now: 4 of 6 tokens held
    assert skip == 4, f"the same prompt again: reserve says {skip} tokens held, want 4 (one block of 4)"
    out = dw.admit(KVMessage(2, p, 77, 4, kv[:, :, 4:]))
    assert out is not None and tuple(out.token_ids) == (77,) and out.finish_reason == "length", f"max_tokens 1: {out}"
    skip = dw.reserve(3, p, 3, True)  # ignore_eos: an EOS first token goes on
    assert dw.admit(KVMessage(3, p, EOS, skip, kv[:, :, skip:])) is None, "ignore_eos: a first-token EOS must not end the request"
    outs = dw.step() + dw.step()
    assert [o.request_id for o in outs] == [3], f"finished after two steps: {[o.request_id for o in outs]}, want [3]"
    want, gaps = hf_continue(kv, EOS, 3, eos=None)
    check_tokens(outs[0].token_ids, want, gaps, tol("greedy near-tie")["atol"], "an EOS first token under ignore_eos")
    assert dw.load == 0 and dw.llm.block_manager.num_used_blocks == 0, "blocks held after every request ended"


@pytest.mark.points(2)
def test_hidden_a_refused_message_keeps_the_reservation(tol):
    (p,) = random_prompts(46, [13])
    kv = hf_prompt_kv(p)
    dw = DecodeWorker(model_dir(), **DECODE_ENGINE)
    dw.reserve(5, p, 4, True)
    with pytest.raises(ValueError):
        dw.admit(KVMessage(5, p, 9, 4, kv[:, :, 4:]))  # the pool holds nothing: KV must start at 0
    with pytest.raises(ValueError):
        dw.admit(KVMessage(5, p, 9, 0, kv[:, :, :12]))  # one position short
    with pytest.raises(ValueError):
        dw.admit(KVMessage(6, p, 9, 0, kv))  # never reserved
    assert dw.admit(KVMessage(5, p, 9, 0, kv)) is None, "the right message after refused ones"
    outs = []
    while dw.load:
        outs += dw.step()
    want, gaps = hf_continue(kv, 9, 4, eos=None)
    check_tokens(outs[0].token_ids, want, gaps, tol("greedy near-tie")["atol"], "after two refused messages")


@pytest.mark.points(1)
def test_hidden_abort_frees_reserved_and_running_requests():
    (p,) = random_prompts(47, [9])
    dw = DecodeWorker(model_dir(), **DECODE_ENGINE)
    dw.reserve(1, p, 8, True)
    dw.reserve(2, p, 8, True)
    dw.admit(KVMessage(2, p, 5, 0, hf_prompt_kv(p)))
    dw.step()
    dw.abort(1)
    dw.abort(2)
    dw.abort(3)
    assert dw.load == 0 and dw.llm.block_manager.num_used_blocks == 0, f"after aborting both: load {dw.load}, {dw.llm.block_manager.num_used_blocks} blocks held"
    assert dw.step() == []


@in_worker
def stop_token_model(path: str, eos: int) -> str:
    """A folder with the course model's files (linked) and a config.json whose eos_token_id is `eos`
    (in the worker's temporary directory): the decode worker's stop token becomes one greedy
    decoding really samples."""
    import json
    import tempfile
    from pathlib import Path

    src, dst = Path(path), Path(tempfile.mkdtemp(prefix="stop-model-"))
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f.resolve())
    cfg = json.loads((src / "config.json").read_text())
    cfg["eos_token_id"] = eos
    (dst / "config.json").write_text(json.dumps(cfg))
    return str(dst)


@pytest.mark.points(2)
def test_hidden_a_stop_token_sampled_in_a_decode_step_ends_the_request(tol):
    """The model's EOS made the 4th token HF samples after this prompt's KV: the request must end
    there with finish_reason "stop", the stop token kept, its blocks freed."""
    (p,) = random_prompts(48, [12])
    kv = hf_prompt_kv(p)
    free_run, gaps = hf_continue(kv, 5, 8, eos=None)
    assert min(gaps[1:4]) >= tol("greedy near-tie")["atol"], "the oracle's first tokens must not be near-ties"
    eos = free_run[3]
    assert eos not in free_run[:3], "the chosen stop token must first appear 4th"
    dw = DecodeWorker(stop_token_model(model_dir(), eos), **DECODE_ENGINE)
    dw.reserve(0, p, 8, False)
    assert dw.admit(KVMessage(0, p, 5, 0, kv)) is None
    outs = []
    for _ in range(6):
        outs += dw.step()
    assert [tuple(o.token_ids) for o in outs] == [free_run[:4]], f"outputs {[tuple(o.token_ids) for o in outs]}, want {[free_run[:4]]} (stopped at {eos})"
    assert outs[0].finish_reason == "stop", f"finish_reason {outs[0].finish_reason!r} after sampling the stop token"
    assert dw.load == 0 and dw.llm.block_manager.num_used_blocks == 0, "blocks held after the request stopped"


@pytest.mark.points(1)
def test_hidden_a_prompt_whose_first_token_is_the_stop_token_is_still_prefilled(tol):
    """The prefill worker's engine has the prompt's own greedy first token as its EOS: the request
    must not end inside the engine before its KV is read (the decode side decides what a stop is)."""
    (p,) = random_prompts(49, [20])
    first, gaps = hf_greedy(p, 1, ignore_eos=True)
    assert gaps[0] >= tol("greedy near-tie")["atol"], "the oracle's first token must not be a near-tie"
    worker = PrefillWorker(stop_token_model(model_dir(), first[0]), **PREFILL_ENGINE)
    (m,) = worker.prefill([PrefillRequest(3, p)])
    assert m.first_token == first[0], f"first token {m.first_token}, HF's {first[0]}"
    torch.testing.assert_close(m.kv, hf_prompt_kv(p), **tol("kv, fp32"), msg=lambda s: f"KV of a prompt whose first token is the stop token: {s}")
    assert worker.llm.block_manager.num_used_blocks == 0, "blocks held after the prefill"
