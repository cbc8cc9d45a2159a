"""Figure: paged KV cache: block tables map each sequence's logical blocks to physical blocks, and
position p to slot block_table[p // B] * B + p % B.

Source: the s05 reference (solutions/s05_kvcache/kvcache): a `BlockManager` of 10 blocks of 4
slots (prefix caching off) runs a fixed script on seeded random prompts (allocate s0, s1, s2,
free s0, allocate s3, so s3's table is not contiguous), and `slot_mapping` gives every token's
slot. Belongs in course/stages/05-kv-cache-and-scheduling.md, at the "slot of position p" row of
"Key formulas" (and stage 6's "Slot mapping off by one" pitfall).
"""

from __future__ import annotations

import random
from pathlib import Path

from course.figures._common import pyplot, reference, save

SEED, NUM_BLOCKS, BLOCK_SIZE, VOCAB = 0, 10, 4, 1000
# (action, sequence id, prompt length): the allocation script that fragments the pool.
SCRIPT = (("allocate", 0, 7), ("allocate", 1, 10), ("allocate", 2, 5), ("free", 0, 0), ("allocate", 3, 13))


def data() -> dict:
    """Live sequences with their block tables and slots, and the pool's owner of every slot."""
    kv = reference("s05_kvcache", "kvcache")
    bm = kv.BlockManager(NUM_BLOCKS, BLOCK_SIZE, enable_prefix_caching=False)
    rng = random.Random(SEED)
    seqs = {}
    for action, sid, n in SCRIPT:
        if action == "allocate":
            seqs[sid] = kv.Sequence(sid, [rng.randrange(VOCAB) for _ in range(n)], max_tokens=1)
            bm.allocate(seqs[sid])
        else:
            bm.free(seqs.pop(sid))
    live = []
    owner = {}  # slot -> (seq id, position)
    for sid, seq in seqs.items():
        slots = kv.slot_mapping(seq.block_table, 0, seq.num_tokens, BLOCK_SIZE)
        live.append({"seq_id": sid, "num_tokens": seq.num_tokens, "block_table": list(seq.block_table),
                     "slots": list(slots)})
        owner.update({slot: (sid, pos) for pos, slot in enumerate(slots)})
    block_owner = {blk: s["seq_id"] for s in live for blk in s["block_table"]}
    return {"num_blocks": NUM_BLOCKS, "block_size": BLOCK_SIZE, "script": SCRIPT, "live": live,
            "owner": owner, "block_owner": block_owner, "free_blocks": list(bm.free_queue)}


def _cell(ax, x, y, text, color, small=""):
    ax.add_patch(pyplot().Rectangle((x, y), 1, 0.8, facecolor=color, alpha=0.45, edgecolor="k", lw=0.6))
    ax.text(x + 0.5, y + 0.45, text, ha="center", va="center", fontsize=7)
    if small:
        ax.text(x + 0.95, y + 0.05, small, ha="right", va="bottom", fontsize=5.5, color="#444444")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    b = d["block_size"]
    fig, (ax_l, ax_p) = plt.subplots(1, 2, figsize=(11, 5.2), width_ratios=[1.6, 1])
    color = {s["seq_id"]: f"C{s['seq_id']}" for s in d["live"]}
    for row, s in enumerate(d["live"]):
        y = 2.2 * (len(d["live"]) - 1 - row)
        ax_l.text(-0.3, y + 0.4, f"s{s['seq_id']}\n{s['num_tokens']} tokens", ha="right", va="center", fontsize=8)
        for pos in range(s["num_tokens"]):
            x = pos + pos // b * 0.4  # a gap between logical blocks
            _cell(ax_l, x, y, f"p{pos}", color[s["seq_id"]], small=str(s["slots"][pos]))
        for i, blk in enumerate(s["block_table"]):
            x = i * (b + 0.4)
            ax_l.text(x + b / 2, y - 0.35, f"logical {i} -> block {blk}", ha="center", va="center", fontsize=7)
    ax_l.set_xlim(-3, 4 * (b + 0.4) + 0.5)
    ax_l.set_ylim(-1, 2.2 * len(d["live"]))
    ax_l.axis("off")
    ax_l.set_title("sequences: position p (small: its slot); below: the block table", fontsize=9)
    for blk in range(d["num_blocks"]):
        y = d["num_blocks"] - 1 - blk
        ax_p.text(-0.2, y + 0.4, f"block {blk}", ha="right", va="center", fontsize=7)
        for off in range(b):
            slot = blk * b + off
            sid, pos = d["owner"].get(slot, (None, None))
            if sid is not None:
                _cell(ax_p, off, y, f"s{sid} p{pos}", color[sid], small=str(slot))
            elif blk in d["block_owner"]:  # held by a sequence, not written yet (< 1 block of waste)
                _cell(ax_p, off, y, f"(s{d['block_owner'][blk]}, empty)", "white", small=str(slot))
            else:
                _cell(ax_p, off, y, "free", "#eeeeee", small=str(slot))
    ax_p.set_xlim(-1.6, b + 0.2)
    ax_p.set_ylim(-0.5, d["num_blocks"] + 0.3)
    ax_p.axis("off")
    ax_p.set_title(f"physical pool: {d['num_blocks']} blocks x {b} slots (small: slot id)", fontsize=9)
    script = ", ".join(f"{a} s{sid}" + (f" ({n})" if n else "") for a, sid, n in d["script"])
    fig.suptitle(f"Paged KV: slot = block_table[p // {b}] * {b} + p % {b}   [s05 reference BlockManager "
                 f"+ slot_mapping]\nscript: {script}", fontsize=9)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "paged_slots.png"))
