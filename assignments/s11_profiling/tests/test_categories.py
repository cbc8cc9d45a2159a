"""Kernel categories by the course's rules (the README's table), and the shares of GPU time on a
committed trace against HTA's per-kernel sums grouped by the same rules in the test."""

from __future__ import annotations

import pytest
from conftest import hta_kernels, rule, w_classify, w_shares

import coursedata

NAMES = {
    "nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT": "gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>": "gemm",
    "_paged_decode_kernel": "attention",
    "_attn_fwd_kernel": "attention",
    "_rms_norm_kernel": "elementwise",
    "Memcpy HtoD (Pageable -> Device)": "memory",
    "Memset (Device)": "memory",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>": "elementwise",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL": "communication",
    "my_custom_kernel": "other",
}

@pytest.mark.points(2)
def test_classify_by_the_rules():
    assert w_classify(list(NAMES)) == list(NAMES.values())


@pytest.mark.points(3)
def test_shares_of_the_eager_decode_step_match_hta_grouped_by_the_rules():
    got = w_shares(str(coursedata.profile_path("p1_decode_eager")))
    sums: dict[str, float] = {}
    for name, (_, total, _, _) in hta_kernels("p1_decode_eager").items():
        sums[rule(name)] = sums.get(rule(name), 0.0) + total
    whole = sum(sums.values())
    assert set(got) == {"attention", "gemm", "elementwise", "memory", "communication", "other"}
    for cat, share in got.items():
        assert share == pytest.approx(sums.get(cat, 0.0) / whole, abs=1e-9), cat
