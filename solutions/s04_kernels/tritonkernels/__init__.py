"""Memory-bound Triton kernels of a transformer block (stage 4).

The graded API: fused_add_rmsnorm, softmax, swiglu.
"""

from tritonkernels.rmsnorm import fused_add_rmsnorm
from tritonkernels.softmax import softmax
from tritonkernels.swiglu import swiglu

__all__ = ["fused_add_rmsnorm", "softmax", "swiglu"]
