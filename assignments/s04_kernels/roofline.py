"""Time your four kernels at the graded perf-test shapes and a copy in the same run (needs CUDA):

    python roofline.py                      # writes answers/kernel_timings.json
    python roofline.py --out /tmp/t.json

The file is the data of README "Analysis: your kernels on the roofline": the device, the bandwidth
of a device-to-device copy, and per kernel its name, dtype, argument shapes, other arguments and
median seconds. Timing is the course timer the perf tests use (`autograder.timing.measure`: 3
warm-up calls, 20 timed, L2 flushed before each, CUDA events, median). Each kernel's last output is
checked against torch first: the time of a wrong kernel means nothing. Without a GPU, copy
kernel_timings_h200.json (the course H200's figures, in this same format) to answers/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
from pathlib import Path

COPY_BYTES = 1 << 29  # 537 MB: within the 268-537 MB copies the perf tests divide by
SCALE = 1 / math.sqrt(128)
# The perf tests' shapes (hidden/test_perf_hidden.py); the grader reads the same list.
KERNELS = [
    {"name": "fused_add_rmsnorm", "dtype": "bfloat16",
     "shapes": {"x": [16384, 8192], "residual": [16384, 8192], "weight": [8192]}, "args": {"eps": 1e-6}},
    {"name": "softmax", "dtype": "float32", "shapes": {"x": [16384, 8192]}, "args": {}},
    {"name": "swiglu", "dtype": "bfloat16", "shapes": {"gate": [16384, 14336], "up": [16384, 14336]}, "args": {}},
    {"name": "paged_decode", "dtype": "bfloat16",
     "shapes": {"q": [16, 32, 128], "k_cache": [8193, 16, 8, 128], "v_cache": [8193, 16, 8, 128],
                "block_tables": [16, 512], "context_lens": [16]},
     "args": {"context_lens": [8192] * 16, "scale": SCALE, "split_tokens": 256}},
]


def cases():
    """name -> (call the kernel, the torch answer, tolerance name), on the perf tests' inputs."""
    import torch
    import torch.nn.functional as F
    from conftest import paged_case
    from tritonkernels import fused_add_rmsnorm, paged_decode, softmax, swiglu

    def randn(shape, seed, dtype):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(shape, generator=g, device="cuda").to(dtype)

    def rmsnorm():
        x, res = randn((16384, 8192), 0, torch.bfloat16), randn((16384, 8192), 1, torch.bfloat16)
        w = randn((8192,), 2, torch.bfloat16) * 0.1 + 1
        r = (x + res).float()
        ref = (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16()
        return lambda: fused_add_rmsnorm(x, res, w, eps=1e-6)[0], ref, "rmsnorm, bf16"

    def soft():
        x = 4 * randn((16384, 8192), 3, torch.float32)
        return lambda: softmax(x), torch.softmax(x, -1), "softmax, fp32"

    def glu():
        gate, up = randn((16384, 14336), 5, torch.bfloat16), randn((16384, 14336), 6, torch.bfloat16)
        return lambda: swiglu(gate, up), F.silu(gate) * up, "swiglu, bf16"

    def decode():
        q, k, v, tables, lens = paged_case(30, [8192] * 16, heads=32, kv_heads=8, head_dim=128, block_size=16,
                                           dtype=torch.bfloat16, device="cuda", spare_blocks=0)
        keys, values = (c[tables.long()].flatten(1, 2).transpose(1, 2) for c in (k, v))  # (B, Hkv, T, D)
        ref = F.scaled_dot_product_attention(q[:, :, None], keys, values, scale=SCALE, enable_gqa=True)[:, :, 0]
        return lambda: paged_decode(q, k, v, tables, lens, SCALE, 256), ref, "paged decode, bf16"

    return {"fused_add_rmsnorm": rmsnorm, "softmax": soft, "swiglu": glu, "paged_decode": decode}


def to_json(data: dict) -> str:
    """The file's text: a line per field and per kernel, so two runs' files diff line by line."""
    head = "".join(f"\n {json.dumps(key)}: {json.dumps(value)}," for key, value in data.items() if key != "kernels")
    kernels = ",\n  ".join(json.dumps(record) for record in data["kernels"])
    return "{" + head + '\n "kernels": [\n  ' + kernels + "\n ]\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=Path(__file__).parent / "answers" / "kernel_timings.json")
    out = Path(parser.parse_args().out)
    import torch
    import triton

    if not torch.cuda.is_available():
        raise SystemExit("roofline.py times kernels on a CUDA GPU; without one, copy kernel_timings_h200.json "
                         "to answers/kernel_timings.json")
    from autograder.testing import tolerances
    from autograder.timing import copy_bandwidth, measure

    tol = tolerances(Path(__file__).parent)
    device = torch.cuda.get_device_name()
    before = copy_bandwidth(COPY_BYTES)  # also warms the GPU up for the first kernel
    records, build = [], cases()
    for spec in KERNELS:
        fn, ref, tol_name = build[spec["name"]]()
        timing = measure(fn)
        torch.testing.assert_close(fn(), ref, **tol(tol_name))
        records.append({**spec, "median_s": timing.median_s})
        print(f"{spec['name']}: {timing.median_s * 1e6:.1f} us")
        del fn, ref
        torch.cuda.empty_cache()
    after = copy_bandwidth(COPY_BYTES)
    copy = max(before, after)  # the ceiling: a copy timed before clocks settle reads low
    print(f"{device}: copy {before / 1e12:.2f} TB/s before the kernels, {after / 1e12:.2f} after")
    note = (f"measured by roofline.py on {datetime.date.today()}: torch {torch.__version__}, "
            f"triton {triton.__version__}")
    data = {"note": note, "device": device, "copy_bytes_per_s": copy, "kernels": records}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_json(data))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
