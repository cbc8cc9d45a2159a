"""Figure: prefix caching two ways on the same four prompts: vLLM's chain of block hashes vs
SGLang's radix tree.

Source: the s05 reference (solutions/s05_kvcache/kvcache): a `BlockManager` with prefix caching
(blocks of 4 tokens) admits the prompts in order, each fully computed and registered with
`cache_full_blocks` before the next arrives; a `RadixCache` gets the same prompts by `insert`.
The prompts (PROMPTS below, one word = one token) are the named input. Belongs in
course/stages/05-kv-cache-and-scheduling.md, at the "chained block hash" and "cacheable blocks of
a lookup" rows of "Key formulas" (and the radix-cache pitfall).
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import DECODE, PREFILL, pyplot, reference, save

BLOCK_SIZE, NUM_BLOCKS = 4, 32
PROMPTS = (
    "you are a helpful bot . translate : hello world",
    "you are a helpful bot . translate : good night",
    "you are a helpful bot . summarize : the paper",
    "you are a terse bot . summarize : the paper",
)


def _vocab() -> dict[str, int]:
    words = sorted({w for p in PROMPTS for w in p.split()})
    return {w: i for i, w in enumerate(words)}


def _hash_chain(kv, prompts: list[list[int]]) -> list[dict]:
    bm = kv.BlockManager(NUM_BLOCKS, BLOCK_SIZE, enable_prefix_caching=True)
    rows = []
    for i, ids in enumerate(prompts):
        seq = kv.Sequence(i, ids, max_tokens=1)
        bm.allocate(seq)
        hit_blocks = seq.num_cached_tokens // BLOCK_SIZE
        seq.num_computed_tokens = seq.num_tokens  # the prefill ran: register its full blocks
        bm.cache_full_blocks(seq)
        rows.append({"block_table": list(seq.block_table), "hit_blocks": hit_blocks,
                     "hashes": list(seq.block_hashes), "num_tokens": seq.num_tokens})
    return rows


def _radix(kv, prompts: list[list[int]]) -> tuple[list[int], list[dict], int]:
    cache, matched, next_slot = kv.RadixCache(), [], 0
    for ids in prompts:
        slots = list(range(next_slot, next_slot + len(ids)))
        matched.append(cache.insert(ids, slots))
        next_slot += len(ids)
    nodes, stack = [], [(cache.root, 0, -1)]
    while stack:  # depth-first, children in first-token order: a deterministic layout
        node, start, parent = stack.pop()
        nodes.append({"id": node.node_id, "parent": parent, "key": list(node.key), "start": start})
        for first in sorted(node.children, reverse=True):
            stack.append((node.children[first], start + len(node.key), node.node_id))
    return matched, nodes, cache.total_size()


def data() -> dict:
    kv = reference("s05_kvcache", "kvcache")
    vocab = _vocab()
    prompts = [[vocab[w] for w in p.split()] for p in PROMPTS]
    matched, nodes, stored = _radix(kv, prompts)
    return {"prompts": prompts, "words": {i: w for w, i in vocab.items()}, "block_size": BLOCK_SIZE,
            "chain": _hash_chain(kv, prompts), "radix_matched": matched, "radix_nodes": nodes,
            "radix_tokens": stored}


def _draw_chain(ax, d: dict) -> None:
    plt, b, words = pyplot(), d["block_size"], d["words"]
    for r, (ids, row) in enumerate(zip(d["prompts"], d["chain"])):
        y = len(d["prompts"]) - 1 - r
        ax.text(-0.2, y + 0.35, f"prompt {r}", ha="right", va="center", fontsize=8)
        for i, blk in enumerate(row["block_table"]):
            toks = ids[i * b : (i + 1) * b]
            full = len(toks) == b
            color = DECODE if i < row["hit_blocks"] else PREFILL if full else "white"
            ax.add_patch(plt.Rectangle((i * 1.05, y), 1, 0.7, facecolor=color, alpha=0.45, edgecolor="k",
                                       ls="-" if full else "--", lw=0.7))
            ax.text(i * 1.05 + 0.5, y + 0.45, " ".join(words[t] for t in toks), ha="center", fontsize=6.5)
            tag = f"block {blk}" + (f", h={row['hashes'][i] & 0xFFFF:04x}" if i < len(row["hashes"]) else ", partial")
            ax.text(i * 1.05 + 0.5, y + 0.12, tag, ha="center", fontsize=6, color="#333333")
    ax.set(xlim=(-1, 3.3), ylim=(-0.4, len(d["prompts"])))
    ax.axis("off")
    ax.set_title("hash chain (vLLM): h_i = H(h_(i-1), block i); blue = hit (shared block),\n"
                 "orange = computed and registered, dashed = partial (never cached)", fontsize=8.5)


def _draw_radix(ax, d: dict) -> None:
    nodes, words = d["radix_nodes"], d["words"]
    leaves = [n for n in nodes if n["id"] not in {m["parent"] for m in nodes}]
    y = {n["id"]: float(len(leaves) - 1 - k) for k, n in enumerate(leaves)}
    for n in reversed(nodes):  # children before parents: a parent sits at its children's mean
        kids = [y[m["id"]] for m in nodes if m["parent"] == n["id"]]
        y.setdefault(n["id"], sum(kids) / len(kids) if kids else 0.0)
    pos = {n["id"]: (n["start"] if n["parent"] >= 0 else -2.5, y[n["id"]]) for n in nodes}
    for n in nodes:
        x, yy = pos[n["id"]]
        if n["parent"] >= 0:
            px, py = pos[n["parent"]]
            ax.plot([px, x], [py, yy], color="#888888", lw=0.8)
        label = " ".join(words[t] for t in n["key"]) or "root"
        ax.text(x, yy, label, ha="left", va="center", fontsize=7,
                bbox={"boxstyle": "round", "fc": "#e8f0fa" if n["key"] else "white", "ec": "k", "lw": 0.6})
    ax.set(xlim=(-3, max(len(p) for p in d["prompts"]) + 4), ylim=(-0.7, len(leaves) - 0.3))
    ax.axis("off")
    ax.set_title(f"radix tree (SGLang), one token per slot: {d['radix_tokens']} tokens stored;\n"
                 f"tokens matched on insert: {d['radix_matched']}", fontsize=8.5)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, (ax_c, ax_r) = plt.subplots(1, 2, figsize=(12, 3.9), width_ratios=[1.15, 1])
    _draw_chain(ax_c, d)
    _draw_radix(ax_r, d)
    hits = [row["hit_blocks"] * d["block_size"] for row in d["chain"]]
    fig.suptitle(f"Prefix caching on the same prompts [s05 reference]: block hashes reuse {hits} tokens; "
                 f"the radix tree reuses {d['radix_matched']}", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "prefix_cache.png"))
