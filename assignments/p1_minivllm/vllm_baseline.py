"""The bench's workload through vLLM's offline engine: the production reference point for
`bench.py --vllm`. vLLM is not a course dependency: it runs in the second GPU image
(gpu_runners/Dockerfile.vllm), which brings its own torch. Not graded.

Same requests as the engine under test: token-id prompts (no tokenizer), greedy, EOS ignored so
each request produces exactly its output length, all submitted at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class VllmRun:
    seconds: float
    output_tokens: int

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.seconds


def run_vllm(model_path: str, prompts: list[list[int]], out_lens: list[int], *, dtype: str = "bfloat16",
             block_size: int = 16, max_num_seqs: int = 256, gpu_memory_utilization: float = 0.9,
             enforce_eager: bool = False) -> VllmRun:
    """vLLM's LLM.generate over the workload, timed after a two-request warm-up."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as e:
        raise SystemExit("--vllm needs vLLM, which the course's environments do not install: run the bench "
                         "in the image of gpu_runners/Dockerfile.vllm") from e
    llm = LLM(model=model_path, dtype=dtype, skip_tokenizer_init=True, block_size=block_size,
              max_num_seqs=max_num_seqs, gpu_memory_utilization=gpu_memory_utilization,
              enforce_eager=enforce_eager, max_model_len=2 * max(out_lens) + max(map(len, prompts)), seed=0)
    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, detokenize=False) for n in out_lens]
    requests = [{"prompt_token_ids": p} for p in prompts]
    llm.generate(requests[:2], params[:2], use_tqdm=False)
    start = time.perf_counter()
    outputs = llm.generate(requests, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    return VllmRun(seconds, sum(len(o.outputs[0].token_ids) for o in outputs))
