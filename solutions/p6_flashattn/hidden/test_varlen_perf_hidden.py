"""Throughput of a packed batch of mixed lengths against SDPA's FLASH backend on the same
sequences, timed in the same run (bf16, d = 128, 16 heads, causal, 16k tokens as the other perf
shapes). FLOPs = sum_b 4 H L_b^2 d / 2 for the forward, x 3.5 for forward + backward.

The baseline calls FLASH once per sequence, on that sequence's own (1, H, L_b, d) tensors: it does
exactly the work ours does. Padding to the longest sequence would charge it for the padding
(1.7x the FLOPs of these lengths, and FLASH takes no padding mask); the loop costs it 8 launches
forward (about 3 more each backward) of a few microseconds beside about a millisecond of attention.

Ours is timed on REPS distinct packed input sets, FLASH on split copies of the first few; the outputs of timed repetitions the judge draws are re-checked against FLASH's on their
sets, and a time implying more FLOP/s than the card's GEMM in this run is held for review.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import in_worker, oracle
from autograder.timing import Work, measure
from torch.nn.attention import SDPBackend, sdpa_kernel

pytestmark = [pytest.mark.gpu, pytest.mark.perf]
LENS = (4096, 512, 2048, 1024, 3072, 1536, 2560, 1536)  # 16384 tokens; longest 4096
HEADS, HEAD_DIM = 16, 128
# One packed set per repetition (4 x 64 MB with do), the worker's copy of it and its kept outputs
# (256 MB each): 12 x 768 MB = 9.2 GB; FLASH's baseline rotates over BASE_SETS split copies (its
# code cannot cache), 1 GB more.
REPS = 12
BASE_SETS = 4


@in_worker
def flash_attention_varlen_call(cu_seqlens, max_len, backward):
    """In the worker: causal flash_attention_varlen (and its backward) as a call of (q, k, v[, do])
    on packed tensors for `measure`; it returns (o,) or (o, dq, dk, dv)."""
    from flashattn import flash_attention_varlen

    def run(q, k, v, do=None):
        o = flash_attention_varlen(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, causal=True)
        return (o.detach(), *torch.autograd.grad(o, (q, k, v), do)) if backward else (o,)

    return run


def _flash_per_sequence(backward):
    """FLASH over each sequence's own tensors: run(q_0..q_7, k_0.., v_0..[, do_0..]) returns the
    packed (o,) or (o, dq, dk, dv) of shape (total, H, d), for checking only (see _packed)."""
    n = len(LENS)

    def run(*tensors):
        qs, ks, vs, dos = (tensors[i * n:(i + 1) * n] for i in range(4)) if backward else (
            *(tensors[i * n:(i + 1) * n] for i in range(3)), None)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            outs = [F.scaled_dot_product_attention(q, k, v, is_causal=True) for q, k, v in zip(qs, ks, vs)]
        if not backward:
            return tuple(o.detach() for o in outs)
        return (*(o.detach() for o in outs), *torch.autograd.grad(outs, (*qs, *ks, *vs), dos))

    return run


def _packed(per_sequence):
    """(1, H, L_b, d) tensors of the 8 sequences, in LENS order -> one (total, H, d) tensor."""
    return torch.cat([t[0].transpose(0, 1) for t in per_sequence])


def _input_sets(backward):
    """REPS packed sets (q, k, v[, do]), each (total, H, d); q, k, v require grad if backward."""
    g = torch.Generator(device="cuda").manual_seed(4096)
    total = sum(LENS)
    sets = []
    for _ in range(REPS):
        ts = [torch.randn(total, HEADS, HEAD_DIM, generator=g, device="cuda", dtype=torch.bfloat16)
              for _ in range(4 if backward else 3)]
        sets.append(tuple(t.requires_grad_(backward and i < 3) for i, t in enumerate(ts)))
    return sets


def _split(packed_set):
    """The same values as each sequence's own contiguous (1, H, L_b, d) tensors, in the order
    _flash_per_sequence takes them (all q, all k, all v[, all do])."""
    cuts = list(itertools.accumulate(LENS, initial=0))
    return tuple(t.detach()[a:b].transpose(0, 1)[None].contiguous().requires_grad_(t.requires_grad)
                 for t in packed_set for a, b in itertools.pairwise(cuts))


def _check(packed, backward):
    flash = _flash_per_sequence(backward)
    n = len(LENS)

    def check(i, outs):
        with oracle():
            ref = flash(*_split(packed[i]))
            refs = [_packed(ref[j * n:(j + 1) * n]) for j in range(len(ref) // n)]
        assert len(outs) == len(refs), f"the timed call returned {len(outs)} of {len(refs)} outputs"
        for what, a, r in zip(("O", "dQ", "dK", "dV"), outs, refs):
            err = ((a.float() - r.float()).norm() / r.float().norm()).item()
            assert err < 2e-2, f"{what} differs from SDPA flash on packed lengths {LENS}, input set {i}: {err:.3g}"

    return check


@pytest.mark.points(2)
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "fwdbwd"])
def test_varlen_throughput_vs_sdpa(backward, perf):
    packed = _input_sets(backward)
    fwd = sum(4 * HEADS * n * n * HEAD_DIM for n in LENS) / 2
    flops = fwd * (3.5 if backward else 1)
    with oracle():
        split = [_split(s) for s in packed[:BASE_SETS]]
        base_s = measure(_flash_per_sequence(backward), warmup=3, reps=REPS, inputs=split).graded_s
        del split
    cu = torch.tensor(list(itertools.accumulate(LENS, initial=0)), dtype=torch.int32, device="cuda")
    ours_s = measure(flash_attention_varlen_call(cu, max(LENS), backward), warmup=3, reps=REPS,
                     inputs=packed, check=_check(packed, backward),
                     work=Work(flops=fwd * (3 if backward else 1))).graded_s
    ratio = base_s / ours_s
    mode = "fwdbwd" if backward else "fwd"
    print(f"varlen {mode} causal bf16 d=128 H={HEADS} lengths {LENS}: ours {flops / ours_s / 1e12:.0f} "
          f"flash per sequence {flops / base_s / 1e12:.0f} TFLOP/s; ratio {ratio:.2f}x")
    perf.record(f"varlen_{mode}_ratio_flash_d128_causal", ratio)
