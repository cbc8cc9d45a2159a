"""The analysis model (README, section "Analysis"): GPT-2 small's parameters in registration order
(Hugging Face's GPT2LMHeadModel; the output layer is tied to the token embedding, so it adds no
parameter), and the numbers the answers ask for, from YOUR bucket_assignment.

    python analysis.py          # prints every number of answers/training_numbers.toml

The grader imports gpt2_small_numels() from its own copy of this file and runs your
bucket_assignment on it.
"""

from __future__ import annotations

MIB = 2**20
HIDDEN, LAYERS, VOCAB, POSITIONS = 768, 12, 50257, 1024


def gpt2_small_numels() -> list[int]:
    """Element counts of GPT-2 small's 148 parameters, registration order (124,439,808 in all)."""
    h = HIDDEN
    layer = [h, h,               # ln_1 weight, bias
             h * 3 * h, 3 * h,   # attn.c_attn (fused q, k, v) weight, bias
             h * h, h,           # attn.c_proj
             h, h,               # ln_2
             h * 4 * h, 4 * h,   # mlp.c_fc
             4 * h * h, h]       # mlp.c_proj
    return [VOCAB * h, POSITIONS * h] + layer * LAYERS + [h, h]  # wte, wpe, blocks, ln_f


def bucket_numbers(cap_mib: float, bytes_per_element: int = 4) -> dict:
    """Buckets of GPT-2 small's gradients at `cap_mib`, reverse registration order."""
    from trainfw import bucket_assignment

    numels = gpt2_small_numels()
    sizes = [n * bytes_per_element for n in numels]
    buckets = bucket_assignment(sizes, int(cap_mib * MIB))
    mib = [sum(sizes[i] for i in b) / MIB for b in buckets]
    return {"count": len(buckets), "first_mib": mib[0], "last_mib": mib[-1], "largest_mib": max(mib)}


if __name__ == "__main__":
    for cap in (1, 25):
        print(f"cap {cap} MiB, fp32:", bucket_numbers(cap))
