"""Time your grouped experts against a loop of torch matmuls on a GPU (what the GPU tier grades, without
the grader's checks): DeepSeek-V3's expert shapes (hidden 7168, intermediate 2048), 8 local experts,
4096 rows split with a skew, bf16, random weights.

    python bench.py            # needs a CUDA GPU; prints both times and the ratio
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

HIDDEN, INTER = 7168, 2048
COUNTS = [1200, 800, 600, 500, 400, 300, 200, 96]


def loop(x, gate, up, down):
    out, start = torch.empty_like(x), 0
    for e, n in enumerate(COUNTS):
        rows = x[start:start + n]
        out[start:start + n] = F.linear(F.silu(F.linear(rows, gate[e])) * F.linear(rows, up[e]), down[e])
        start += n
    return out


def time_ms(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main() -> None:
    from epmoe import grouped_swiglu

    g = torch.Generator(device="cuda").manual_seed(0)
    gate, up = (torch.randn(8, INTER, HIDDEN, device="cuda", generator=g, dtype=torch.bfloat16) / HIDDEN**0.5
                for _ in range(2))
    down = torch.randn(8, HIDDEN, INTER, device="cuda", generator=g, dtype=torch.bfloat16) / INTER**0.5
    x = torch.randn(sum(COUNTS), HIDDEN, device="cuda", generator=g, dtype=torch.bfloat16)
    offsets = torch.tensor([0, *torch.tensor(COUNTS).cumsum(0).tolist()], device="cuda")
    err = (grouped_swiglu(x, offsets, gate, up, down).float() - loop(x, gate, up, down).float()).abs().mean()
    grouped, looped = time_ms(lambda: grouped_swiglu(x, offsets, gate, up, down)), time_ms(lambda: loop(x, gate, up, down))
    flops = 2 * sum(COUNTS) * HIDDEN * INTER * 3
    print(f"mean |grouped - loop| = {float(err):.3g}")
    print(f"grouped {grouped:.3f} ms ({flops / grouped / 1e9:.0f} TFLOP/s), loop {looped:.3f} ms "
          f"({flops / looped / 1e9:.0f} TFLOP/s): {looped / grouped:.3f}x")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("bench.py needs a CUDA GPU")
    main()
