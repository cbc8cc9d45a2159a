"""Judge-side checks shared by tests/ and hidden/.

RoPE: the package's inv_freq and attention factor against transformers (conftest.hf_rope).

Ring attention: the judge-side halves of the multi-rank tests: the secret
inputs, one rank's shards each, and the check of every rank's rows against SDPA over the whole
sequence (conftest.sdpa_reference) at the positions the judge assigns itself.

A case: (layout, causal, window, magnitude); magnitude scales q so that the scores reach the
hundreds (exp() of them overflows fp32 unless every maximum is subtracted first)."""

from __future__ import annotations

import secrets

import pytest
import torch
from conftest import hf_rope, sdpa_reference, zigzag_or_contiguous

from longmoe import rope_inv_freq


def check_rope(name: str, case: tuple, tol: dict) -> None:
    dim, base, params, seq_len = case
    got, got_factor = rope_inv_freq(dim, base, params, seq_len)
    want, want_factor = hf_rope(dim, base, params, seq_len)
    assert tuple(got.shape) == (dim // 2,) and got.dtype == torch.float32, (
        f"{name}: inv_freq of shape {tuple(got.shape)} and dtype {got.dtype}, want ({dim // 2},) float32")
    err = ((got - want).abs() / want).max()
    torch.testing.assert_close(got, want, **tol, msg=lambda m: f"{name}: worst pair {int(((got - want).abs() / want).argmax())} "
                               f"(relative error {err:.3g}): {m}")
    assert got_factor == pytest.approx(want_factor, rel=1e-9), f"{name}: attention factor {got_factor}, want {want_factor:.6g}"


def draw_ring_inputs(cases: list[tuple], world: int, shape: tuple[int, int, int, int]) -> tuple[list, list]:
    """Whole-sequence (q, k, v) per case from a secret seed, and per rank its shards per case."""
    g = torch.Generator().manual_seed(secrets.randbits(62))
    whole, per_rank = [], [[] for _ in range(world)]
    for layout, _causal, _window, magnitude in cases:
        q, k, v = (torch.randn(shape, generator=g) for _ in range(3))
        q = q * magnitude
        whole.append((q, k, v))
        for rank in range(world):
            pos = zigzag_or_contiguous(shape[2], rank, world, layout)
            per_rank[rank].append({"q": q[:, :, pos].clone(), "k": k[:, :, pos].clone(), "v": v[:, :, pos].clone()})
    return whole, per_rank


def check_ring(results: list[dict], whole: list, cases: list[tuple], tol) -> None:
    """Each rank's rows against SDPA over the whole sequence at that rank's positions (`tol` is
    the conftest fixture: cases with scores in the hundreds get their own tolerance), then its
    sends against the ring (`check_ring_sends`)."""
    world = len(results)
    for c, ((layout, causal, window, magnitude), (q, k, v)) in enumerate(zip(cases, whole)):
        want = sdpa_reference(q, k, v, causal, window)
        for rank in range(world):
            pos = zigzag_or_contiguous(q.shape[2], rank, world, layout)
            got = results[rank]["outputs"][c]
            assert tuple(got.shape) == tuple(want[:, :, pos].shape), (
                f"case {c} ({layout}, causal={causal}, window={window}): rank {rank} returned shape "
                f"{tuple(got.shape)}, want {tuple(want[:, :, pos].shape)}")
            worst = int(pos[(got - want[:, :, pos]).abs().amax(dim=(0, 1, 3)).argmax()])
            where = (f"{layout} ring over {world} ranks, causal={causal}, window={window}, q scaled by {magnitude}: "
                     f"rank {rank}, worst at global position {worst}")
            bound = tol("attention, fp32" if magnitude == 1 else "attention, fp32, scores in the hundreds")
            torch.testing.assert_close(got, want[:, :, pos], **bound, msg=lambda m, where=where: f"{where}: {m}")
            check_ring_sends(results[rank]["sent"][c], k, v, rank, world, layout, where)


def check_ring_sends(sent: list, k: torch.Tensor, v: torch.Tensor, rank: int, world: int, layout: str, where: str) -> None:
    """The handout's ring: rank r sends only to rank r + 1, and over the W - 1 steps exactly the key
    and value blocks of ranks r, r - 1, ..., r - W + 2, in that order (K and V of a step in any order
    or packing: compared as the multiset of the step's values, which random inputs make a content
    check); nothing else. A rank that sends its block to every other
    rank, or forwards all it holds at once, is not a ring, whatever its rows."""
    peers = sorted({peer for peer, _ in sent})
    assert peers == [(rank + 1) % world], f"{where}: sends went to ranks {peers}; a ring sends only to rank {(rank + 1) % world}"
    got = torch.cat([t.reshape(-1) for _, t in sent]) if sent else torch.zeros(0)
    steps = []
    for step in range(world - 1):
        pos = zigzag_or_contiguous(k.shape[2], (rank - step) % world, world, layout)
        steps.append((k[:, :, pos].reshape(-1), v[:, :, pos].reshape(-1)))
    size = sum(a.numel() + b.numel() for a, b in steps)
    assert got.numel() == size, (f"{where}: sent {got.numel()} elements over the ring, want {size} "
                                 f"(K and V of one block, {steps[0][0].numel()} elements each, at each of {world - 1} steps)")
    offset = 0
    for step, (kb, vb) in enumerate(steps):
        chunk = got[offset:offset + kb.numel() + vb.numel()]
        offset += chunk.numel()
        ok = torch.equal(chunk.sort().values, torch.cat([kb, vb]).sort().values)  # any packing of the two
        assert ok, (f"{where}: at step {step} the data sent is not the key and value block of rank "
                    f"{(rank - step) % world} (the block a ring holds then)")
