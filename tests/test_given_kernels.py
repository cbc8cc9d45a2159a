"""The Triton kernels an assignment gives its students (not graded, but every GPU grade runs through
them) agree with the plain torch code they replace. They run under the Triton interpreter on CPU,
in a child process: TRITON_INTERPRET must be set before triton is first imported.

Oracles: p1's eager RMSNorm / RoPE / SwiGLU ops (HF numerics) and its torch gather `paged_attention`
(itself checked against SDPA in the assignment's tests). The interpreter computes bf16 wrongly, so
the rounding points are checked in fp16, where each eager op also rounds its result: bit-exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from autograder.host.repo import find_root

P1 = find_root() / "solutions" / "p1_minivllm"
# minivllm runs on the packages P1 is given (stage 5's kvcache, stage 1's transformer): their references
P1_PATH = os.pathsep.join(str(P1.parent / d) for d in ("p1_minivllm", "s05_kvcache", "s01_transformer"))

CHECKS = r"""
import json, torch, torch.nn.functional as F
from minivllm import AttentionMetadata, paged_attention
from minivllm.fused_triton import rms_norm, rope, silu_mul
from minivllm.model import RMSNorm, apply_rope, rope_cos_sin
from minivllm.paged_decode_triton import paged_decode

torch.manual_seed(0)
out = {}
def err(a, b):  # (max abs difference, fraction of elements not bit-equal)
    return [(a.double() - b.double()).abs().max().item(), (a != b).double().mean().item()]
for dt in (torch.float32, torch.float16):
    name = str(dt).split(".")[1]
    x, r = torch.randn(5, 96, dtype=dt), torch.randn(5, 96, dtype=dt)
    norm = RMSNorm(96, 1e-6).to(dt)
    norm.weight.data = torch.randn(96, dtype=dt)
    (y, s), (y_ref, s_ref) = rms_norm(x, norm.weight, 1e-6, r), norm(x, r)
    out[f"add_rms_norm_{name}"] = err(y, y_ref) + err(s, s_ref)
    out[f"rms_norm_{name}"] = err(rms_norm(x, norm.weight, 1e-6)[0], norm(x)[0])
    q = torch.randn(7, 6, 32, dtype=dt)
    cos, sin = rope_cos_sin(torch.tensor([0, 1, 5, 100, 1000, 3000, 4095]), 32, 10000.0, dt)
    out[f"rope_{name}"] = err(rope(q, cos, sin), apply_rope(q, cos, sin))
    g, u = torch.randn(3, 700, dtype=dt), torch.randn(3, 700, dtype=dt)
    out[f"silu_mul_{name}"] = err(silu_mul(g, u), F.silu(g) * u)
# paged decode: GQA 6/2 heads, block size 4, contexts 1..70 over shuffled blocks
bs, kv_heads, heads, dim, contexts = 4, 2, 6, 32, [1, 70, 16, 33]
blocks = [-(-c // bs) for c in contexts]
perm = torch.randperm(sum(blocks) + 3).tolist()
tables = [[perm.pop() for _ in range(n)] for n in blocks]
width = max(blocks)
k_cache, v_cache = torch.randn(2, sum(blocks) + 3, bs, kv_heads, dim).unbind(0)
q = torch.randn(len(contexts), heads, dim)
meta = AttentionMetadata(torch.zeros(len(contexts), dtype=torch.long),
                         torch.arange(len(contexts) + 1, dtype=torch.int32), torch.tensor(contexts, dtype=torch.int32),
                         torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
                         [1] * len(contexts), contexts)
got = paged_decode(q, k_cache, v_cache, meta.block_tables, meta.context_lens, dim ** -0.5)
out["paged_decode_float32"] = err(got, paged_attention(q, k_cache, v_cache, meta, dim ** -0.5))
print(json.dumps(out))
"""


def _child(code: str) -> dict:
    """Run `code` in a child with p1's reference package importable; its last line is JSON."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": P1_PATH}
    proc = subprocess.run([sys.executable, "-c", code], cwd=P1, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def errors() -> dict[str, list[float]]:
    return _child(CHECKS)


@pytest.mark.parametrize("kernel", ["add_rms_norm", "rms_norm", "rope", "silu_mul"])
def test_fused_p1_kernel_rounds_like_the_eager_ops_in_fp16(errors, kernel):
    assert all(e == 0 for e in errors[f"{kernel}_float16"]), errors[f"{kernel}_float16"]


@pytest.mark.parametrize("kernel", ["add_rms_norm", "rms_norm", "rope", "silu_mul"])
def test_fused_p1_kernel_matches_the_eager_ops_in_fp32(errors, kernel):
    # fp32: only the order of the RMS sum and exp/rsqrt's last bits may differ (values are O(1..10))
    max_abs = errors[f"{kernel}_float32"][0::2]
    assert max(max_abs) <= 1e-5, errors[f"{kernel}_float32"]


def test_paged_decode_kernel_matches_the_gather_path_in_fp32(errors):
    assert errors["paged_decode_float32"][0] <= 1e-5, errors["paged_decode_float32"]


def test_attention_in_groups_equals_one_padded_call():
    """The given dispatcher splits a batch whose padded scores would be large (one long prompt among
    short ones) into groups of sequences; the result must equal one call over the whole batch."""
    code = r"""
import json, torch
from minivllm import AttentionMetadata, paged_attention
from minivllm.attention import _padded_in_groups

torch.manual_seed(0)
bs, hkv, h, d = 4, 2, 4, 8
q_lens, ctx = [40, 1, 2, 1, 3, 1], [40, 9, 30, 5, 12, 33]
blocks = [list(range(sum(-(-c // bs) for c in ctx[:i]), sum(-(-c // bs) for c in ctx[:i + 1])))
          for i in range(len(ctx))]
nblocks = blocks[-1][-1] + 1
kc, vc = torch.randn(nblocks, bs, hkv, d), torch.randn(nblocks, bs, hkv, d)
width = max(map(len, blocks))
meta = AttentionMetadata(
    slot_mapping=torch.zeros(sum(q_lens), dtype=torch.long),
    query_start_loc=torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32),
    context_lens=torch.tensor(ctx, dtype=torch.int32),
    block_tables=torch.tensor([t + [0] * (width - len(t)) for t in blocks], dtype=torch.int32),
    query_lens_cpu=q_lens, context_lens_cpu=ctx)
q = torch.randn(sum(q_lens), h, d)
whole, grouped = paged_attention(q, kc, vc, meta, 0.3), _padded_in_groups(q, kc, vc, meta, 0.3)
print(json.dumps({"max_err": (whole - grouped).abs().max().item(), "shape": list(grouped.shape)}))
"""
    out = _child(code)
    assert out["shape"] == [48, 4, 8] and out["max_err"] <= 1e-6


ALLOWLIST = r"""
import json, torch
from autograder.host.spec import AccountingRules
from autograder.worker.accounting import Accountant
from minivllm.fused_triton import rms_norm, rope, silu_mul
from minivllm.paged_decode_triton import paged_decode

torch.manual_seed(0)
rules = AccountingRules(require_kernels=("minivllm",), compute_in_kernels=True)
x, r, w = torch.randn(5, 96), torch.randn(5, 96), torch.randn(96)
q = torch.randn(7, 6, 32)
cos, sin = torch.randn(7, 1, 32), torch.randn(7, 1, 32)
k_cache, v_cache = torch.randn(2, 9, 4, 2, 32).unbind(0)
tables, lens = torch.tensor([[3, 1, 0], [2, 5, 8]], dtype=torch.int32), torch.tensor([9, 12], dtype=torch.int32)
q_decode = torch.randn(2, 6, 32)
calls = {"add_rms_norm": lambda: rms_norm(x, w, 1e-6, r), "rms_norm": lambda: rms_norm(x, w, 1e-6),
         "rope": lambda: rope(q, cos, sin), "silu_mul": lambda: silu_mul(x, r),
         "paged_decode": lambda: paged_decode(q_decode, k_cache, v_cache, tables, lens, 32 ** -0.5)}
out = {}
for name, call in calls.items():
    acct = Accountant(rules, "minivllm", rules.require_kernels)
    acct.begin()
    call()
    out[name] = acct.end()
print(json.dumps(out))
"""


def test_the_given_kernels_compute_only_in_their_kernels():
    """Under the allowlist of a kernel exercise (autograder/protocol/rules.py), each given kernel's
    entry point runs nothing but its own launches, allocation, views, copies and casts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([P1_PATH, str(find_root())])}
    proc = subprocess.run([sys.executable, "-c", ALLOWLIST], cwd=P1, env={**env, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdicts == dict.fromkeys(("add_rms_norm", "rms_norm", "rope", "silu_mul", "paged_decode"), ""), verdicts
