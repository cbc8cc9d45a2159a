"""The analysis of README "Analysis": each number in answers/io_analysis.toml against the same
quantity recomputed here from the student's own tile choice, forward_config(128, on_gpu=True,
dtype=bf16), the tiles their flash_attn_forward launches at the graded shape. Host-side Python
only: no kernel runs, so it grades on a CPU-only machine."""

from __future__ import annotations

import functools
import math

import pytest

from autograder.testing import in_worker, numeric_answer

pytestmark = pytest.mark.kernels()  # host-side tile selection only: no kernel of the package runs

# One (batch, head) of the graded benchmark: bf16, not causal.
N, D, B = 4096, 128, 2
H200_BF16_FLOPS, H200_HBM_BYTES_PER_S = 989e12, 4.8e12  # stage 0 and ANCHORS: dense bf16, HBM3e


@in_worker
def your_forward_tiles() -> list:
    """In the worker: [block_m, block_n, num_warps, num_stages] of the student's forward tiles."""
    import torch
    from flashattn import forward_config

    cfg = forward_config(D, True, torch.bfloat16)
    return [cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages]


@functools.cache
def _tiles() -> tuple[int, int, int]:
    block_m, block_n, _, num_stages = your_forward_tiles()
    for name, v in (("block_m", block_m), ("block_n", block_n), ("num_stages", num_stages)):
        assert type(v) is int and v >= 1, f"forward_config(128, True, torch.bfloat16).{name} = {v!r}: not a positive int"
    return block_m, block_n, num_stages


def query_tiles(block_m, block_n, stages):
    return math.ceil(N / block_m)


def flash_bytes(block_m, block_n, stages):
    # Q read and O written once, LSE (fp32) written once, K and V read once per query tile.
    return (2 + 2 * query_tiles(block_m, block_n, stages)) * N * D * B + 4 * N


def standard_bytes(*_):
    # S = scale Q K^T, P = softmax(S), O = P V, each kernel reading its inputs from HBM.
    return 4 * N * D * B + 4 * N * N * B


def flops(*_):
    return 4 * N * N * D


QUANTITIES = {
    "flash_hbm_bytes": flash_bytes,
    "standard_hbm_bytes": standard_bytes,
    "hbm_bytes_ratio": lambda *t: standard_bytes(*t) / flash_bytes(*t),
    "forward_flops": flops,
    "flash_intensity": lambda *t: flops(*t) / flash_bytes(*t),
    "standard_intensity": lambda *t: flops(*t) / standard_bytes(*t),
    "compulsory_intensity": lambda *t: flops(*t) / (4 * N * D * B + 4 * N),
    "h200_ridge": lambda *_: H200_BF16_FLOPS / H200_HBM_BYTES_PER_S,
    "smem_bytes": lambda block_m, block_n, stages: (block_m + 2 * stages * block_n) * D * B,
}


@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_tiles(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "io_analysis", key)
    tiles = _tiles()
    expected = QUANTITIES[key](*tiles)
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/io_analysis.toml: {key} = {answer}, but your tiles (block_m, block_n, num_stages) = "
        f"{tiles} give {expected:.6g} (definitions in the README, section Analysis)")


@pytest.mark.points(1)
def test_query_tile_count_matches_your_own_tiles(request, tol):
    answer = numeric_answer(request.config.rootpath, "io_analysis", "query_tiles")
    expected = query_tiles(*_tiles())
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["atol"]), (
        f"answers/io_analysis.toml: query_tiles = {answer}, but ceil({N} / block_m) = {expected} "
        f"with your block_m = {_tiles()[0]}")
