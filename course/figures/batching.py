"""Figure: static batching, continuous batching and chunked prefill on the same seeded requests,
as timelines of which request computes what in each step.

Source: the s05 reference (solutions/s05_kvcache/kvcache): its `Scheduler` + `BlockManager`
plan every step under the three configurations of compare.py (static: prefill-first, whole
prompts, no admission while a batch decodes; continuous: prefill-first, whole prompts; chunked:
decode-first with a 512-token budget), and its default `CostModel` (a Llama-3-8B-like bf16 model
on an H200-class GPU, a roofline, not a measurement) times each step. The loop below is
`kvcache.simulate`'s, keeping each step's entries (tests check it gives simulate's timings).
Belongs in course/stages/05-kv-cache-and-scheduling.md, "What the simulator shows" (or its
"Key formulas" step-time row); stage 6 can reuse it.
"""

from __future__ import annotations

import random
from pathlib import Path

from course.figures._common import DECODE, PREFILL, WAITING, pyplot, reference, save

SEED, NUM_REQUESTS, RATE_PER_S = 0, 6, 40.0
PROMPT_LEN, OUTPUT_LEN = (128, 1536), (6, 20)
MAX_NUM_SEQS, CHUNK_BUDGET, MAX_MODEL_LEN = 4, 512, 2048
NUM_BLOCKS, BLOCK_SIZE, VOCAB = 1024, 16, 32000


def requests(seed: int = SEED) -> list[tuple[float, int, int]]:
    """(arrival_s, prompt_len, output_len) records: Poisson arrivals, uniform lengths."""
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(NUM_REQUESTS):
        out.append((round(t, 6), rng.randint(*PROMPT_LEN), rng.randint(*OUTPUT_LEN)))
        t += rng.expovariate(RATE_PER_S)
    return out


def policies(kv) -> dict:
    whole = {"max_num_seqs": MAX_NUM_SEQS, "max_num_batched_tokens": MAX_MODEL_LEN,
             "max_model_len": MAX_MODEL_LEN, "policy": "prefill_first", "enable_chunked_prefill": False}
    return {
        "static batching": kv.SchedulerConfig(**whole, static_batching=True),
        "continuous batching": kv.SchedulerConfig(**whole),
        f"chunked prefill ({CHUNK_BUDGET}-token budget, decode-first)": kv.SchedulerConfig(
            max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=CHUNK_BUDGET, max_model_len=MAX_MODEL_LEN,
            policy="decode_first", enable_chunked_prefill=True),
    }


def run(kv, config, trace) -> dict:
    """Drive the scheduler over the trace; every step's (start, duration, entries)."""
    bm = kv.BlockManager(NUM_BLOCKS, BLOCK_SIZE, enable_prefix_caching=False)
    sched, cost, rng = kv.Scheduler(config, bm), kv.CostModel(), random.Random(SEED + 1)
    seqs = [kv.Sequence(i, [rng.randrange(VOCAB) for _ in range(p)], o, arrival_time=a)
            for i, (a, p, o) in enumerate(trace)]
    steps, now, pending = [], trace[0][0], 0
    while pending < len(seqs) or sched.has_unfinished():
        while pending < len(seqs) and seqs[pending].arrival_time <= now:
            sched.add(seqs[pending])
            pending += 1
        batch = sched.schedule()
        if not batch.entries:
            now = now if batch.preempted else max(now, seqs[pending].arrival_time)
            continue
        dt = cost.step_time(batch)
        steps.append({"start": now, "duration": dt,
                      "entries": [(e.seq_id, e.is_prefill, e.num_tokens) for e in batch.entries]})
        now += dt
        tokens = {e.seq_id: rng.randrange(VOCAB) for e in batch.entries if e.samples}
        finished = sched.update(batch, tokens)
        for sid in tokens:
            if seqs[sid].first_token_time is None:
                seqs[sid].first_token_time = now
        for seq in finished:
            seq.finish_time = now
    return {"steps": steps, "first_token": [s.first_token_time for s in seqs],
            "finish": [s.finish_time for s in seqs]}


def data() -> dict:
    kv = reference("s05_kvcache", "kvcache")
    trace = requests()
    return {"requests": trace, "runs": {name: run(kv, cfg, trace) for name, cfg in policies(kv).items()}}


def _draw_run(ax, name: str, trace, res: dict) -> None:
    n = len(trace)
    for i, (arrival, prompt, output) in enumerate(trace):
        ax.barh(n - 1 - i, (res["finish"][i] - arrival) * 1e3, left=arrival * 1e3, height=0.7, color=WAITING)
        ax.plot([arrival * 1e3] * 2, [n - 1 - i - 0.45, n - 1 - i + 0.45], color="k", lw=1.5)
    for step in res["steps"]:
        for sid, is_prefill, _ in step["entries"]:
            ax.barh(n - 1 - sid, step["duration"] * 1e3, left=step["start"] * 1e3, height=0.7,
                    color=PREFILL if is_prefill else DECODE, edgecolor="w", lw=0.4)
    ttft = [(first - arrival) * 1e3 for first, (arrival, _, _) in zip(res["first_token"], trace)]
    ax.set_yticks(range(n), [f"r{i}: {p}+{o}" for i, (_, p, o) in reversed(list(enumerate(trace)))], fontsize=7)
    makespan = (max(res["finish"]) - trace[0][0]) * 1e3
    ax.set_title(f"{name}: {len(res['steps'])} steps, makespan {makespan:.0f} ms, "
                 f"mean TTFT {sum(ttft) / len(ttft):.0f} ms", fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    from matplotlib.patches import Patch

    runs = d["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.0 * len(runs) + 1.2), sharex=True)
    for ax, (name, res) in zip(axes, runs.items()):
        _draw_run(ax, name, d["requests"], res)
    axes[-1].set_xlabel("time (ms, roofline cost model of the s05 reference: 8B bf16, H200-class)")
    handles = [Patch(color=c, label=n) for c, n in ((PREFILL, "prefill (chunk)"), (DECODE, "decode (1 token)"),
                                                     (WAITING, "waiting / stalled"))]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Batching policies on the same requests (rows: request, prompt+output tokens; "
                 "tick: arrival) [s05 Scheduler]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "batching.png"))
