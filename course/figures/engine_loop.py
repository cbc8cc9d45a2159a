"""Figure: the inference engine's loop, with what the real engine scheduled step by step.

Source: the P1 reference engine (solutions/p1_minivllm/minivllm, on the s05 kvcache and s01
transformer references) serving four seeded token-id prompts with the course model
(datasets/models/course-llama, fp32, CPU, greedy): `LLM(...)` with a small token budget, chunked
prefill and decode-first scheduling, and its `on_step` hook recording each step's
`kvcache.Batch` (which sequences, prefill chunk or decode, how many tokens, their slots) and the
blocks in use. Steps, not seconds: the same on every machine. Belongs in
course/stages/06-inference-engines.md.
"""

from __future__ import annotations

import random
from pathlib import Path

from course.figures._common import DECODE, PREFILL, REPO, pyplot, reference, save

MODEL = REPO / "datasets" / "models" / "course-llama"
PROMPT_LENS, MAX_TOKENS, SEED = (70, 25, 110, 40), 6, 0
CONFIG = {"block_size": 16, "max_num_seqs": 4, "max_num_batched_tokens": 64, "enable_chunked_prefill": True,
          "enable_prefix_caching": False, "scheduling_policy": "decode_first", "device": "cpu", "dtype": "float32",
          "max_model_len": 256, "num_kv_blocks": 64, "seed": SEED}
LOOP = ("scheduler.schedule()\n-> Batch: entries,\npreempted, block copies",
        "copy KV blocks\n(copy-on-write)",
        "model_runner.run(batch)\nvarlen input: ids, positions,\nslot_mapping, block tables\n-> forward -> sample",
        "scheduler.update(batch,\ntokens): append, finish,\nfree blocks",
        "step() returns the\nfinished requests'\noutputs")


def _minivllm():
    reference("s05_kvcache", "kvcache")
    reference("s01_transformer", "transformer")
    return reference("p1_minivllm", "minivllm")


def data() -> dict:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: extra threads only fight over a busy machine's cores
    try:
        return _run(_minivllm())
    finally:
        torch.set_num_threads(threads)


def _run(mv) -> dict:
    rng = random.Random(SEED)
    steps = []

    def record(llm, batch) -> None:
        steps.append({"entries": [(e.seq_id, e.is_prefill, e.num_tokens, e.start_pos, list(e.slot_mapping))
                                  for e in batch.entries],
                      "used_blocks": llm.block_manager.num_blocks - llm.block_manager.num_free_blocks})

    llm = mv.LLM(str(MODEL), on_step=record, **CONFIG)
    vocab = llm.model_config.vocab_size
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in PROMPT_LENS]
    params = mv.SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    for p in prompts:
        llm.add_request(p, params)
    outputs = []
    while llm.has_unfinished_requests():
        outputs += llm.step()
    return {"prompt_lens": list(PROMPT_LENS), "steps": steps, "num_blocks": llm.block_manager.num_blocks,
            "outputs": {o.request_id: list(o.outputs[0].token_ids) for o in outputs}}


def _draw_loop(ax, example: dict, index: int) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.axis("off")
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 3.2)
    xs = [0.1 + i * 2.0 for i in range(len(LOOP))]
    for i, (x, text) in enumerate(zip(xs, LOOP)):
        ax.add_patch(FancyBboxPatch((x, 1.7), 1.75, 1.3, boxstyle="round,pad=0.03", fc="#f0f0f0", ec="k", lw=0.8))
        ax.text(x + 0.875, 2.35, text, ha="center", va="center", fontsize=7)
        if i + 1 < len(LOOP):
            ax.annotate("", (x + 2.0, 2.35), (x + 1.8, 2.35), arrowprops={"arrowstyle": "->"})
    ax.annotate("", (xs[0] + 0.4, 1.65), (xs[-1] + 1.3, 1.65),
                arrowprops={"arrowstyle": "->", "connectionstyle": "arc3,rad=-0.12", "ls": "--"})
    ax.text(5, 1.25, "next step while requests remain", ha="center", fontsize=7.5)
    lines = [f"step {index + 1} as the engine ran it:"]
    for seq, prefill, n, start, slots in example["entries"]:
        kind = f"prefill chunk of {n}" if prefill else "decode"
        shown = ", ".join(map(str, slots)) if len(slots) <= 4 else f"{slots[0]}, {slots[1]}, ..., {slots[-1]}"
        lines.append(f"seq {seq}: {kind}, positions {start}..{start + n - 1}, slots [{shown}]")
    ax.text(0.1, 1.0, "\n".join(lines), va="top", fontsize=7, family="monospace")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(10, 6.2), gridspec_kw={"height_ratios": [1.25, 1]})
    mixed = next(i for i, s in enumerate(d["steps"]) if len({e[1] for e in s["entries"]}) == 2)
    _draw_loop(ax, d["steps"][mixed], mixed)
    for i, step in enumerate(d["steps"]):
        bottom = 0
        for seq, prefill, n, _, _ in sorted(step["entries"]):
            bx.bar(i + 1, n, bottom=bottom, color=PREFILL if prefill else DECODE, edgecolor="w", lw=0.5)
            if n >= 8:
                bx.text(i + 1, bottom + n / 2, f"s{seq}", ha="center", va="center", fontsize=6.5)
            bottom += n
    bx.axhline(CONFIG["max_num_batched_tokens"], color="k", ls="--", lw=0.8)
    bx.text(len(d["steps"]) + 0.6, CONFIG["max_num_batched_tokens"], "token budget", va="bottom", ha="right",
            fontsize=7)
    bx.set_xlabel(f"engine step (prompts of {', '.join(map(str, d['prompt_lens']))} tokens, {MAX_TOKENS} "
                  "output tokens each; orange: prefill chunk, blue: decode)")
    bx.set_ylabel("tokens computed")
    cx = bx.twinx()
    cx.plot(range(1, len(d["steps"]) + 1), [s["used_blocks"] for s in d["steps"]], "k.-", lw=0.8, ms=3)
    cx.set_ylabel(f"KV blocks in use (of {d['num_blocks']})")
    cx.set_ylim(0, None)
    fig.suptitle(f"The engine loop [p1 minivllm LLM.step]; below: every step of a run on course-llama "
                 f"(budget {CONFIG['max_num_batched_tokens']} tokens, blocks of {CONFIG['block_size']}, "
                 "chunked prefill, decode-first)", fontsize=9, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "engine_loop.png"))
