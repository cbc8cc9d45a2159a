"""Benchmark minivllm against HF `generate` over static padded batches of the same requests.

The workload is nano-vllm's: random prompt token ids, prompt and output lengths uniform in
[min_len, max_len], Python's `random` seeded with 0 and drawn in nano-vllm's order, every request
arriving at once, EOS ignored so each request produces exactly its output length.

    python bench.py               # CPU-sized, under a minute: 16 requests, lengths in [16, 64]
    python bench.py --full        # nano-vllm's: 256 requests, lengths in [100, 1024], ~250M LLaMA (GPU)
    python bench.py --model PATH --num-requests 64 --max-len 512 --no-hf
    python bench.py --plot bench.png   # also draw throughput and TTFT / TPOT distributions (bench_plot.py)

Throughput counts output tokens. TTFT: arrival (all at t = 0) to the first token. TPOT: time per
output token after the first. The HF baseline runs batches of --hf-batch-size requests in arrival
order, left-padded, each batch generating as many tokens as its longest request needs.
At --full scale the HF baseline alone takes several minutes on an H200.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import torch

from bench_plot import BenchRun, hardware_name, latencies, percentile, save
from minivllm import LLM, SamplingParams

PRESETS = {
    # hidden 256, 4 layers: big enough to be more than Python overhead on a CPU, small enough to bench
    "small": dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048),
    # ~253M parameters: the GPU tier's model
    "250m": dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                 num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096),
}


def nano_vllm_workload(num_requests: int, min_len: int, max_len: int, vocab: int, seed: int = 0):
    """(prompts, output lengths) drawn like nano-vllm's bench.py (ids modulo the vocabulary)."""
    rng = random.Random(seed)
    prompts = [[rng.randint(0, 10000) % vocab for _ in range(rng.randint(min_len, max_len))]
               for _ in range(num_requests)]
    outputs = [rng.randint(min_len, max_len) for _ in range(num_requests)]
    return prompts, outputs


def build_random_llama(preset: str, device: str, dtype: torch.dtype):
    """A seeded random HF LlamaForCausalLM of `preset`, saved to a temporary folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**PRESETS[preset], tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    path = tempfile.mkdtemp(prefix=f"llama-{preset}-")
    model.save_pretrained(path)
    return path, model


def load_hf(path: str, device: str, dtype: torch.dtype):
    import transformers
    from transformers import LlamaForCausalLM

    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return LlamaForCausalLM.from_pretrained(path, **{key: dtype}).to(device).eval()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_hf_static(model, prompts, out_lens, batch_size: int, device: str) -> float:
    """Seconds HF generate takes over static left-padded batches in arrival order."""
    model.generation_config.eos_token_id = None  # like ignore_eos
    sync(device)
    start = time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i:i + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in batch], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=device)
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, max_new_tokens=max(out_lens[i:i + batch_size]),
                           do_sample=False, pad_token_id=0)
    sync(device)
    return time.perf_counter() - start


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="nano-vllm's workload: 256 requests, lengths [100, 1024]")
    p.add_argument("--model", help="HF LLaMA folder (default: a random LLaMA of --preset)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="random model size (default: 250m on CUDA, small on CPU)")
    p.add_argument("--num-requests", type=int)
    p.add_argument("--min-len", type=int)
    p.add_argument("--max-len", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hf-batch-size", type=int, help="HF static batch size (default: 32 on CUDA, 16 on CPU)")
    p.add_argument("--no-hf", action="store_true", help="skip the HF baseline")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--no-chunked-prefill", action="store_true")
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs for decode steps")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU intra-op threads (default 1: on small matrices the thread pool costs more than it gives)")
    p.add_argument("--vllm", action="store_true", help="also run the workload through vLLM's offline engine "
                   "(vllm_baseline.py; only in the image of gpu_runners/Dockerfile.vllm)")
    p.add_argument("--plot", metavar="PATH", help="also save a PNG of the throughputs and the TTFT / TPOT "
                   "distributions (bench_plot.py) here")
    args = p.parse_args()
    cuda = args.device == "cuda"
    args.num_requests = args.num_requests or (256 if args.full else 16)
    args.min_len, args.max_len = args.min_len or (100 if args.full else 16), args.max_len or (1024 if args.full else 64)
    args.preset = args.preset or ("250m" if cuda or args.full else "small")
    args.hf_batch_size = args.hf_batch_size or (32 if cuda else 16)
    return args


def settings_line(args: argparse.Namespace) -> str:
    """The model and workload in one line (the plot's second title line)."""
    model = args.model or f"random LLaMA ({args.preset})"
    return (f"{model}, {'bf16' if args.device == 'cuda' else 'fp32'}; {args.num_requests} requests, prompt and "
            f"output lengths uniform in [{args.min_len}, {args.max_len}], seed {args.seed}; "
            f"KV blocks of {args.block_size}, at most {args.max_num_seqs} sequences")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    n, lo, hi = args.num_requests, args.min_len, args.max_len
    if args.model:
        path, hf = args.model, None
    else:
        path, hf = build_random_llama(args.preset, args.device, dtype)
    llm = LLM(path, device=args.device, dtype="bfloat16" if cuda else "float32", block_size=args.block_size,
              max_num_seqs=args.max_num_seqs, max_num_batched_tokens=max(args.max_num_batched_tokens, 2 * hi),
              gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=2 * hi + 1,
              enable_chunked_prefill=not args.no_chunked_prefill, enable_prefix_caching=not args.no_prefix_caching,
              enforce_eager=args.enforce_eager)
    prompts, out_lens = nano_vllm_workload(n, lo, hi, llm.model_config.vocab_size, args.seed)
    params = [SamplingParams(temperature=0, max_tokens=m, ignore_eos=True) for m in out_lens]

    llm.generate(prompts[:2], [SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)] * 2)  # warm-up
    sync(args.device)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=True)
    sync(args.device)
    elapsed = time.perf_counter() - start
    total = sum(len(o.outputs[0].token_ids) for o in outputs)
    ttft, tpot = latencies(outputs)
    print(f"workload: {n} requests, prompt/output lengths uniform in [{lo}, {hi}], seed {args.seed}; "
          f"model {args.model or args.preset} on {args.device}")
    print(f"minivllm: {total} output tokens in {elapsed:.2f} s = {total / elapsed:,.0f} tok/s | "
          f"TTFT mean {statistics.fmean(ttft) * 1e3:.0f} ms, p50 {percentile(ttft, 0.5) * 1e3:.0f} ms, "
          f"p99 {percentile(ttft, 0.99) * 1e3:.0f} ms | TPOT mean {statistics.fmean(tpot) * 1e3:.2f} ms | "
          f"{llm.block_manager.num_blocks} KV blocks of {args.block_size}, "
          f"{llm.num_preemptions} preemptions")
    vllm_tok_s = None
    hf_s = None
    if args.vllm or not args.no_hf:
        del llm
        if cuda:
            torch.cuda.empty_cache()
    if args.vllm:
        from vllm_baseline import run_vllm

        theirs = run_vllm(path, prompts, out_lens, dtype="bfloat16" if cuda else "float32",
                          block_size=args.block_size, max_num_seqs=args.max_num_seqs,
                          gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager)
        vllm_tok_s = theirs.tok_s
        print(f"vLLM: {theirs.output_tokens} output tokens in {theirs.seconds:.2f} s = {vllm_tok_s:,.0f} tok/s | "
              f"minivllm / vLLM = {total / elapsed / vllm_tok_s:.2f}x")
    if not args.no_hf:
        if cuda:
            torch.cuda.empty_cache()
        hf = hf or load_hf(path, args.device, dtype)
        run_hf_static(hf, prompts[:2], [4, 4], 2, args.device)  # warm-up
        hf_s = run_hf_static(hf, prompts, out_lens, args.hf_batch_size, args.device)
        print(f"HF generate, static batches of {args.hf_batch_size}: {hf_s:.2f} s = {total / hf_s:,.0f} tok/s | "
              f"minivllm / HF = {hf_s / elapsed:.1f}x")
    if args.plot:
        threads = "" if cuda else f", {args.threads} thread{'s' * (args.threads > 1)}"
        save(BenchRun(hardware=hardware_name(args.device) + threads, settings=settings_line(args),
                      engine_tok_s=total / elapsed, ttft_s=ttft, tpot_s=tpot, hf_tok_s=total / hf_s if hf_s else None,
                      hf_label=f"HF generate (static batches of {args.hf_batch_size})", vllm_tok_s=vllm_tok_s),
             args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
