"""Memory-bound Triton kernels of a transformer block (stage 4).

The graded API: fused_add_rmsnorm, softmax, swiglu, and paged decode attention with split-KV
(paged_decode = paged_decode_split, then combine_splits).
"""

from tritonkernels.paged_decode import combine_splits, num_splits_for, paged_decode, paged_decode_split
from tritonkernels.rmsnorm import fused_add_rmsnorm
from tritonkernels.softmax import softmax
from tritonkernels.swiglu import swiglu

__all__ = ["combine_splits", "fused_add_rmsnorm", "num_splits_for", "paged_decode", "paged_decode_split", "softmax",
           "swiglu"]
