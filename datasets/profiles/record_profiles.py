"""Record the profiler traces that s11_profiling reads (needs a CUDA GPU; ~1 min on an H200).

    PYTHONPATH=.:solutions/p1_minivllm:solutions/p6_flashattn python datasets/profiles/record_profiles.py

Writes, next to this file, Chrome/Kineto traces from torch.profiler (CPU ops with input shapes, CUDA
runtime and driver calls, GPU kernels):
- p1_decode_eager.json.gz: two pure decode steps of the P1 engine, the ~250M random LLaMA in bf16,
  32 sequences of 512 tokens, every kernel launched from Python (enforce_eager=True);
- p1_decode_graphs.json.gz: the same two steps replayed from the engine's CUDA graphs;
- p6_attention_block.json.gz: two forwards of one LLaMA attention block (bf16, B 4, S 1024,
  16 heads of 64) whose attention is P6's Triton flash kernel, the projections cuBLAS GEMMs;
and device.json: the device's name, software versions and its peaks measured in the same run
(bf16 GEMM 8192^3 TFLOP/s; device-to-device copy bandwidth, bytes read + written).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

HERE = Path(os.environ.get("PROFILES_OUT", Path(__file__).resolve().parent))  # $OUT on a GPU runner
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def record(name: str, step, iterations: int = 2) -> None:
    for _ in range(3):
        step()  # warm-up: compiled kernels, cuBLAS heuristics, captured graphs
    torch.cuda.synchronize()
    with profile(activities=ACTIVITIES, record_shapes=True) as prof:
        for _ in range(iterations):
            step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(HERE / f"{name}.json.gz"))


def p1_decode(enforce_eager: bool):
    from bench import build_random_llama
    from minivllm import LLM, SamplingParams

    path, _ = build_random_llama("250m", "cuda", torch.bfloat16)
    llm = LLM(path, device="cuda", dtype="bfloat16", max_num_seqs=32, enforce_eager=enforce_eager)
    g = torch.Generator().manual_seed(0)
    for _ in range(32):
        prompt = torch.randint(0, 32000, (512,), generator=g).tolist()
        llm.add_request(prompt, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    sched = llm.scheduler
    while sched.waiting or any(q.num_computed_tokens < q.num_tokens - 1 for q in sched.running):
        llm.step()  # prefill; from here on a step is a pure decode of 32 rows
    return llm.step


def p6_block():
    from flashattn import flash_attention

    torch.manual_seed(0)
    b, s, h, d = 4, 1024, 16, 64
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(b, s, h * d, device=dev, dtype=dt)
    wqkv = torch.randn(3 * h * d, h * d, device=dev, dtype=dt) / (h * d) ** 0.5
    wo = torch.randn(h * d, h * d, device=dev, dtype=dt) / (h * d) ** 0.5
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)
    ang = torch.outer(torch.arange(s, device=dev, dtype=torch.float32), inv)
    cos, sin = ang.cos().to(dt), ang.sin().to(dt)

    def rope(t):  # (B, H, S, D), rotate-half pairing
        t1, t2 = t[..., : d // 2], t[..., d // 2:]
        return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], dim=-1)

    def step():
        with torch.no_grad():
            q, k, v = F.linear(x, wqkv).view(b, s, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)
            o = flash_attention(rope(q), rope(k), v, causal=True)
            return F.linear(o.transpose(1, 2).reshape(b, s, h * d), wo) + x
    return step


def device_peaks() -> dict:
    from autograder.timing import copy_bandwidth, measure

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t = measure(lambda: a @ a, warmup=5, reps=30).median_s
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "bf16_gemm_flops_per_s": 2 * n**3 / t,
            "copy_bytes_per_s": copy_bandwidth(1 << 28, device="cuda")}


def main() -> None:
    record("p1_decode_eager", p1_decode(enforce_eager=True))
    record("p1_decode_graphs", p1_decode(enforce_eager=False))
    record("p6_attention_block", p6_block())
    (HERE / "device.json").write_text(json.dumps(device_peaks(), indent=1) + "\n")


if __name__ == "__main__":
    main()
