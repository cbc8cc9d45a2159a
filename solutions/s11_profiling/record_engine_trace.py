"""Record your own engine's decode step (README, section "Analysis", part 3; needs a CUDA GPU).

    python record_engine_trace.py        # writes answers/engine_trace.json.gz (~30 s)

Runs the P1 engine next to this folder (`minivllm`: the course's, or yours carried in) on the course
model in bf16, eager (every kernel launched from Python): 32 sequences of 256 prompt tokens are
prefilled, then two pure decode steps are recorded with torch.profiler (CPU operators with their
shapes, CUDA runtime and driver calls, GPU kernels), each inside a `record_function` named
STEP_LABEL. Analyse the file with your own traceprof; the grader does the same with your code.
"""

from __future__ import annotations

from pathlib import Path

STEP_LABEL = "s11_engine_step"
OUT = Path(__file__).resolve().parent / "answers" / "engine_trace.json.gz"
SEQS, PROMPT_TOKENS, STEPS = 32, 256, 2


def course_dir(name: str) -> Path:
    for root in (Path.cwd(), *Path.cwd().parents):
        if (root / "datasets" / "models" / name / "config.json").is_file():
            return root / "datasets" / "models" / name
    raise SystemExit(f"datasets/models/{name} not found above {Path.cwd()}")


def engine_at_decode():
    """An eager engine whose next step is a pure decode of SEQS rows."""
    import torch
    from minivllm import LLM, SamplingParams

    llm = LLM(str(course_dir("course-llama")), device="cuda", dtype="bfloat16", max_num_seqs=SEQS,
              enforce_eager=True)
    g = torch.Generator().manual_seed(0)
    for _ in range(SEQS):
        prompt = torch.randint(2, 4096, (PROMPT_TOKENS,), generator=g).tolist()
        llm.add_request(prompt, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    sched = llm.scheduler
    while sched.waiting or any(s.num_computed_tokens < s.num_tokens - 1 for s in sched.running):
        llm.step()  # prefill (and the first decodes of early sequences)
    return llm


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not torch.cuda.is_available():
        raise SystemExit("record_engine_trace.py needs a CUDA GPU: the analysis reads the GPU's timeline")
    llm = engine_at_decode()
    for _ in range(3):
        llm.step()  # warm-up: Triton compilation, cuBLAS heuristics
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for _ in range(STEPS):
            with record_function(STEP_LABEL):
                llm.step()
        torch.cuda.synchronize()
    OUT.parent.mkdir(exist_ok=True)
    prof.export_chrome_trace(str(OUT))
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB) on {torch.cuda.get_device_name(0)}")


if __name__ == "__main__":
    main()
