"""Shared by tests/ and hidden/: where the kernels run.

Without a GPU, Triton kernels run in its interpreter on CPU tensors. TRITON_INTERPRET must be set
before triton is first imported; pytest loads this file before any test module imports the
package, so setting it here is early enough.
"""

import os
from pathlib import Path

import pytest
import torch

from autograder.testing import oracle, tolerances

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> str:
    """The device small-shape tests run on: the GPU when there is one, else the CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]
    (the handout prints the same table), for torch.testing.assert_close(actual, expected, **tol(name))."""
    return _TOLERANCES


def paged_case(seed: int, context_lens: list[int], *, heads: int = 4, kv_heads: int = 2, head_dim: int = 32,
               block_size: int = 16, dtype: torch.dtype = torch.float32, device: str = "cpu", spare_blocks: int = 3):
    """A random decode batch over a paged KV cache: (q, k_cache, v_cache, block_tables, context_lens).

    Each sequence gets the blocks its context needs, drawn in shuffled order from the pool. Every slot
    the kernels must not read holds NaN: the unused tail of each sequence's last block, and one poison
    block that all block-table entries past a context point to.
    """
    g = torch.Generator().manual_seed(seed)
    need = [-(-n // block_size) for n in context_lens]
    max_blocks = max(need)
    num_blocks = sum(need) + spare_blocks + 1
    k = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=g)
    v = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=g)
    q = torch.randn(len(context_lens), heads, head_dim, generator=g)
    poison = num_blocks - 1
    order = torch.randperm(num_blocks - 1, generator=g).tolist()
    tables = torch.full((len(context_lens), max_blocks), poison, dtype=torch.int32)
    for b, (n, used) in enumerate(zip(context_lens, need)):
        blocks = [order.pop() for _ in range(used)]
        tables[b, :used] = torch.tensor(blocks, dtype=torch.int32)
        if n % block_size:  # slots past the context in its last block
            k[blocks[-1], n % block_size:] = float("nan")
            v[blocks[-1], n % block_size:] = float("nan")
    k[poison] = float("nan")
    v[poison] = float("nan")
    lens = torch.tensor(context_lens, dtype=torch.int32)
    return tuple(t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype) for t in (q, k, v, tables, lens))


def paged_attention_oracle(q, k_cache, v_cache, block_tables, context_lens, scale, token_range=None):
    """Attention of each sequence's query over its gathered context, in float64 on the CPU.

    Returns (out (B, H, D), lse (B, H)) as float64. token_range = (begin, end) restricts every
    sequence to its tokens in [begin, min(end, ctx)); a sequence with none gets out 0, lse -inf.
    """
    q, k_cache, v_cache = (t.detach().cpu().double() for t in (q, k_cache, v_cache))
    block_tables, context_lens = block_tables.cpu().long(), context_lens.cpu().long()
    num_seqs, heads, head_dim = q.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.zeros(num_seqs, heads, head_dim, dtype=torch.float64)
    lse = torch.full((num_seqs, heads), float("-inf"), dtype=torch.float64)
    for b in range(num_seqs):
        n = int(context_lens[b])
        begin, end = token_range or (0, n)
        if min(end, n) <= begin:
            continue
        t = torch.arange(begin, min(end, n))
        blocks = block_tables[b, t // block_size]
        keys = k_cache[blocks, t % block_size].repeat_interleave(heads // kv_heads, dim=1)  # (T, H, D)
        values = v_cache[blocks, t % block_size].repeat_interleave(heads // kv_heads, dim=1)
        with oracle():
            scores = torch.einsum("hd,thd->ht", q[b], keys) * scale
            lse[b] = torch.logsumexp(scores, dim=-1)
            out[b] = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), values)
    return out, lse


@pytest.fixture(scope="session")
def paged():
    """The paged-decode test kit: paged.case(...) builds a batch, paged.oracle(...) is the answer."""
    from types import SimpleNamespace

    return SimpleNamespace(case=paged_case, oracle=paged_attention_oracle)
