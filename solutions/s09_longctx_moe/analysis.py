"""The analysis model (README, section "Analysis"): the settings behind each number of
answers/longctx_numbers.toml, computed from YOUR package.

    python analysis.py          # prints every number of answers/longctx_numbers.toml

The grader imports these functions from its own copy of this file and runs them on your package.
"""

from __future__ import annotations

import torch

LLAMA2 = {"dim": 128, "base": 10000.0, "train": 4096}           # head dim, rope_theta, training context
LLAMA31 = {"dim": 128, "base": 500000.0, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
RING = {"seq_len": 131072, "world": 8}
SAME = 1e-6  # a pair counts as "kept" when its inv_freq is within this relative distance of plain RoPE's


def ntk_base_at_4x() -> float:
    """The base NTK-aware (dynamic, factor 1) scaling uses at 4x the training length: recovered from
    your inv_freq[1] = base ** (-2 / dim)."""
    from longmoe import rope_inv_freq

    d = LLAMA2["dim"]
    params = {"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": LLAMA2["train"]}
    inv_freq, _ = rope_inv_freq(d, LLAMA2["base"], params, seq_len=4 * LLAMA2["train"])
    return float(inv_freq[1].double() ** (-d / 2))


def pair_counts(dim: int, base: float, params: dict) -> dict:
    """How many of the dim/2 pairs your scaling keeps (ratio 1), divides by the full factor, or blends."""
    from longmoe import rope_inv_freq

    plain, _ = rope_inv_freq(dim, base, None)
    scaled, attention = rope_inv_freq(dim, base, params)
    ratio = (scaled.double() / plain.double())
    kept = int(((ratio - 1).abs() < SAME).sum())
    divided = int(((ratio * params["factor"] - 1).abs() < SAME).sum())
    return {"kept": kept, "divided": divided, "blended": dim // 2 - kept - divided, "attention_factor": attention}


def yarn_counts() -> dict:
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": LLAMA2["train"]}
    return pair_counts(LLAMA2["dim"], LLAMA2["base"], params)


def llama3_counts() -> dict:
    params = {k: v for k, v in LLAMA31.items() if k not in ("dim", "base")}
    return pair_counts(LLAMA31["dim"], LLAMA31["base"], params)


def causal_imbalance(layout: str) -> float:
    """max over ranks / mean over ranks of the causal (query, key) pairs a rank computes: a query at
    position p sees p + 1 keys; your shard_positions decides which queries a rank holds."""
    from longmoe import shard_positions

    n, w = RING["seq_len"], RING["world"]
    work = [float((shard_positions(n, r, w, layout).double() + 1).sum()) for r in range(w)]
    return max(work) / (sum(work) / w)


def collapsed_switch_loss() -> float:
    """Switch's loss (8 experts, top-2) when all 1024 tokens put logit 8 on experts 0 and 1, 0 elsewhere."""
    from longmoe import switch_load_balancing_loss

    logits = torch.zeros(1024, 8)
    logits[:, :2] = 8.0
    return float(switch_load_balancing_loss(logits, 2))


def numbers() -> dict:
    yarn, llama3 = yarn_counts(), llama3_counts()
    return {"ntk_base_4x": ntk_base_at_4x(), "yarn_attention_factor": yarn["attention_factor"],
            "yarn_kept_pairs": yarn["kept"], "yarn_divided_pairs": yarn["divided"],
            "llama3_kept_pairs": llama3["kept"], "llama3_divided_pairs": llama3["divided"],
            "contiguous_imbalance": causal_imbalance("contiguous"), "zigzag_imbalance": causal_imbalance("zigzag"),
            "collapsed_switch_loss": collapsed_switch_loss()}


if __name__ == "__main__":
    for key, value in numbers().items():
        print(f"{key} = {value:.6g}")
