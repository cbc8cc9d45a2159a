"""Achieved bandwidth at LLM sizes, as a fraction of a device-to-device copy timed in the same run.

bandwidth = bytes a kernel must move (each input read once, each output written once) / median
time. The copy moves the same number of bytes per element read and written, so a fraction near 1
means the kernel runs at the memory system's practical speed. Eager PyTorch is timed too and its
ratio printed (not graded).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from autograder.testing import in_worker, oracle
from autograder.timing import copy_bandwidth, measure

from tritonkernels import fused_add_rmsnorm, paged_decode, softmax, swiglu

pytestmark = [pytest.mark.gpu, pytest.mark.perf]


def _randn(shape, seed, dtype):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda").to(dtype)


@in_worker
def submission(name, *args, **kwargs):
    """In the worker: the package's kernel `name` as a call without arguments (what gets timed)."""
    kernels = {"fused_add_rmsnorm": fused_add_rmsnorm, "softmax": softmax, "swiglu": swiglu}
    return lambda: kernels[name](*args, **kwargs)


def _timed(fn):
    """Median seconds of fn(), and the output of its last timed call (re-checked by the caller).
    Timing the submission (a worker callable), `measure` times it in the worker under the judge's
    clock and audits one more call (its ops and device kernels), whose output it returns."""
    if not hasattr(fn, "__code__"):  # a worker callable (what `submission` returns)
        timing = measure(fn)
        return timing.median_s, timing.output
    last = {}

    def run():
        last["out"] = fn()

    return measure(run).median_s, last["out"]


def _report(name, nbytes, t_kernel, t_eager, copy_bw):
    bw = nbytes / t_kernel
    print(f"{name}: {bw / 1e12:.2f} TB/s = {bw / copy_bw:.3f} of copy ({copy_bw / 1e12:.2f} TB/s); "
          f"{t_kernel * 1e6:.0f} us vs eager {t_eager * 1e6:.0f} us ({t_eager / t_kernel:.2f}x)")
    return bw / copy_bw


@pytest.mark.points(2)
def test_fused_add_rmsnorm_bandwidth(perf, tol):
    m, n, dtype = 16384, 8192, torch.bfloat16
    x, res = _randn((m, n), 0, dtype), _randn((m, n), 1, dtype)
    w = _randn((n,), 2, dtype) * 0.1 + 1

    def eager():
        new_res = x + res
        r = new_res.float()
        return (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(dtype)

    t, (out, new_res) = _timed(submission("fused_add_rmsnorm", x, res, w, eps=1e-6))
    with oracle():  # the eager baseline is not audited
        t_eager, ref = _timed(eager)
    torch.testing.assert_close(out, ref, **tol("rmsnorm, bf16"))  # outputs of timed runs
    torch.testing.assert_close(new_res, x + res, **tol("residual sum"))
    nbytes = 4 * x.numel() * x.element_size() + w.numel() * w.element_size()
    frac = _report("fused_add_rmsnorm bf16 16384x8192", nbytes, t, t_eager,
                   copy_bandwidth(x.numel() * x.element_size()))
    perf.record("fused_rmsnorm_bw_fraction", frac)


@pytest.mark.points(2)
def test_softmax_bandwidth(perf, tol):
    x = 4 * _randn((16384, 8192), 3, torch.float32)
    t, y = _timed(submission("softmax", x))
    with oracle():
        t_eager, ref = _timed(lambda: torch.softmax(x, -1))
    torch.testing.assert_close(y, ref, **tol("softmax, fp32"))
    copy_bw = copy_bandwidth(x.numel() * x.element_size())
    frac = _report("softmax fp32 16384x8192", 2 * x.numel() * 4, t, t_eager, copy_bw)
    # Vocabulary-sized rows take the two-pass path; reported, not graded.
    logits = 4 * _randn((512, 128256), 4, torch.float32)
    t, y = _timed(submission("softmax", logits))
    with oracle():
        t_eager, ref = _timed(lambda: torch.softmax(logits, -1))
    torch.testing.assert_close(y, ref, **tol("softmax, fp32, long rows"))
    _report("softmax fp32 512x128256 (two passes, counted as one)", 2 * logits.numel() * 4,
            t, t_eager, copy_bw)
    perf.record("softmax_bw_fraction", frac)


@pytest.mark.points(2)
def test_swiglu_bandwidth(perf, tol):
    gate = _randn((16384, 14336), 5, torch.bfloat16)
    up = _randn((16384, 14336), 6, torch.bfloat16)
    t, y = _timed(submission("swiglu", gate, up))
    with oracle():
        t_eager, ref = _timed(lambda: F.silu(gate) * up)
    torch.testing.assert_close(y, ref, **tol("swiglu, bf16"))
    nbytes = 3 * gate.numel() * gate.element_size()
    frac = _report("swiglu bf16 16384x14336", nbytes, t, t_eager,
                   copy_bandwidth(gate.numel() * gate.element_size()))
    perf.record("swiglu_bw_fraction", frac)


@in_worker
def paged_decode_call(q, k, v, tables, lens, scale, split_tokens):
    """In the worker: the package's paged decode as a call without arguments (what gets timed)."""
    return lambda: paged_decode(q, k, v, tables, lens, scale, split_tokens)


@pytest.mark.points(2)
def test_paged_decode_bandwidth(perf, paged, tol):
    # A decode step of 16 sequences at 8k context with LLaMA-3-8B's attention shape: 0.54 GB of KV.
    lens = [8192] * 16
    q, k, v, tables, lens_t = paged.case(30, lens, heads=32, kv_heads=8, head_dim=128, block_size=16,
                                         dtype=torch.bfloat16, device="cuda", spare_blocks=0)
    scale = 1 / math.sqrt(128)
    t, out = _timed(paged_decode_call(q, k, v, tables, lens_t, scale, 256))
    t_one, _ = _timed(paged_decode_call(q, k, v, tables, lens_t, scale, 8192))

    def eager():  # gather each context, then SDPA with GQA
        idx = tables.long()
        keys = k[idx].flatten(1, 2).transpose(1, 2)  # (B, Hkv, T, D)
        values = v[idx].flatten(1, 2).transpose(1, 2)
        return F.scaled_dot_product_attention(q[:, :, None], keys, values, scale=scale, enable_gqa=True)[:, :, 0]

    with oracle():
        t_eager, ref = _timed(eager)
    torch.testing.assert_close(out, ref, **tol("paged decode, bf16"))
    kv_bytes = 2 * sum(lens) * 8 * 128 * k.element_size()
    nbytes = kv_bytes + 2 * q.numel() * q.element_size()
    frac = _report("paged_decode bf16 16 x 8192 tokens, 32/8 heads", nbytes, t, t_eager, copy_bandwidth(kv_bytes // 2))
    print(f"one split per sequence: {t_one * 1e6:.0f} us ({t_one / t:.2f}x the split-KV time)")
    perf.record("paged_decode_bw_fraction", frac)
