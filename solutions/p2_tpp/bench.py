"""Runs your engine on CPU gloo ranks and writes its timeline; prints the deployment plan's numbers.

    python bench.py                    # PP=2 with 1 and with 2 micro-batches, TP=2; course model
    python bench.py --tp 2 --pp 2      # one configuration (4 ranks)
    python -c "from bench import plan_numbers; print(plan_numbers())"   # answers/deployment_plan.toml

Each run writes timeline_<config>.json (open it in ui.perfetto.dev) and timeline_<config>.png (one
row per rank), and prints decode tokens/s. The model is datasets/models/course-llama (6 query heads,
2 KV heads, 5 layers: TP=2 and PP=2 fit; TP=4 needs a model whose query heads split over 4)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = next((p for p in Path(__file__).resolve().parents if (p / "datasets" / "models").is_dir()), None)
MODEL = ROOT / "datasets" / "models" / "course-llama" if ROOT else None


def plan_numbers() -> dict[str, float]:
    """The numbers of answers/deployment_plan.toml, from your plan_deployment."""
    from tpp import plan_deployment

    cfg = json.loads((ROOT / "datasets" / "model_configs" / "llama-3-70b.json").read_text())
    big = plan_deployment(cfg, tp=8, pp=2, batch=64, context=4096)
    small = plan_deployment(cfg, tp=8, pp=2, batch=1, context=128)
    return {"weight_gib_per_gpu": max(big.weight_bytes) / 2**30, "kv_gib_per_gpu": max(big.kv_bytes) / 2**30,
            "nvlink_mib_per_step": max(big.nvlink_bytes) / 2**20, "network_mib_per_step": big.network_bytes / 2**20,
            "step_ms_batch64": big.step_time_s * 1e3, "step_ms_batch1": small.step_time_s * 1e3}


def _rank(rank: int, world: int, port: int, tp: int, pp: int, m: int, prompts: int, steps: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from tpp import ParallelLLM, SamplingParams

    llm = ParallelLLM(str(MODEL), tp=tp, pp=pp, num_microbatches=m, record_timeline=True, max_num_seqs=prompts,
                      max_model_len=256, block_size=16)
    g = torch.Generator().manual_seed(0)
    batch = [torch.randint(0, llm.model_config.vocab_size, (16,), generator=g).tolist() for _ in range(prompts)]
    start = time.perf_counter()
    outs = llm.generate(batch, SamplingParams(temperature=0, max_tokens=steps, ignore_eos=True))
    elapsed = time.perf_counter() - start
    queue.put((rank, llm.events(), elapsed, outs[0].outputs[0].token_ids[:8]))
    dist.destroy_process_group()


def run(tp: int, pp: int, m: int, prompts: int = 8, steps: int = 32, port: int = 29611) -> float:
    """One configuration on tp * pp ranks; writes its trace and PNG; returns decode tokens/s."""
    from tpp import plot_timeline, write_trace

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, tp * pp, port, tp, pp, m, prompts, steps, queue)) for r in range(tp * pp)]
    for p in procs:
        p.start()
    results = sorted((queue.get() for _ in procs), key=lambda r: r[0])
    for p in procs:
        p.join()
    events = [r[1] for r in results]
    name = f"tp{tp}_pp{pp}_mb{m}"
    write_trace(events, f"timeline_{name}.json")
    plot_timeline(events, f"TP={tp} PP={pp}, {m} micro-batch(es)").savefig(f"timeline_{name}.png", dpi=120)
    rate = prompts * steps / max(r[2] for r in results)
    print(f"{name}: {rate:.0f} tokens/s over {prompts} sequences x {steps} steps; first tokens {results[0][3]}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tp", type=int)
    parser.add_argument("--pp", type=int)
    parser.add_argument("--microbatches", type=int, default=2)
    args = parser.parse_args()
    if args.tp or args.pp:
        run(args.tp or 1, args.pp or 1, args.microbatches)
        return
    for tp, pp, m in ((1, 2, 1), (1, 2, 2), (2, 1, 1)):
        run(tp, pp, m)
    print(json.dumps(plan_numbers(), indent=2))


if __name__ == "__main__":
    main()
