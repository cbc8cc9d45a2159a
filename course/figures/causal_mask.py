"""Figure: the causal mask offset by a KV cache: which (query, key) pairs are visible when q new
tokens follow c cached ones.

Source: `causal_mask(num_queries, num_keys)` of the s01 reference
(solutions/s01_transformer/transformer/attention.py), for three cases of one 10-slot sequence:
a prefill (c = 0), a chunk after a cache (the chunked-prefill case), and a one-token decode.
Belongs in course/stages/01-transformer.md, at the "causal mask with a cache" row of "Key
formulas" and the "The mask is offset by the cache" pitfall (stage 5's chunked prefill uses it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from course.figures._common import DECODE, PREFILL, pyplot, reference, save

# (queries q, cached keys c) of each panel: all three end at slot 10.
CASES = ((10, 0), (4, 6), (1, 9))


def data(cases: tuple[tuple[int, int], ...] = CASES) -> list[dict]:
    """One dict per case: q, c and the (q, c + q) boolean mask, True = may attend."""
    tf = reference("s01_transformer", "transformer")
    out = []
    for q, c in cases:
        mask = tf.causal_mask(num_queries=q, num_keys=c + q)[0, 0]  # (q, c + q)
        out.append({"q": q, "c": c, "mask": mask.numpy().astype(bool)})
    return out


def _panel(ax, case: dict) -> None:
    q, c, mask = case["q"], case["c"], case["mask"]
    s = q + c
    img = np.ones((q, s, 3))
    img[mask] = (0.12, 0.47, 0.71)  # visible
    img[~mask] = (0.93, 0.93, 0.93)  # hidden
    ax.imshow(img, extent=(-0.5, s - 0.5, c + q - 0.5, c - 0.5), aspect="equal")
    if c:
        ax.axvspan(-0.5, c - 0.5, ymin=0, ymax=1, fill=False, hatch="//", edgecolor=PREFILL, lw=0)
        ax.axvline(c - 0.5, color=PREFILL, lw=2)
    ax.set_xticks(range(s))
    ax.set_yticks(range(c, c + q))
    ax.set_xticks(np.arange(-0.5, s), minor=True)
    ax.set_yticks(np.arange(c - 0.5, c + q), minor=True)
    ax.grid(which="minor", color="w", lw=1)
    ax.tick_params(which="minor", length=0, labelsize=7)
    ax.set_xlabel("key slot j  (hatched: from the KV cache)")
    ax.set_ylabel("query at slot c + i")
    kind = "prefill" if c == 0 else "decode" if q == 1 else "chunk after a cache"
    ax.set_title(f"{kind}: q = {q}, c = {c}\nvisible iff j <= c + i", fontsize=9)


def draw(cases: list[dict], path: str | Path) -> Path:
    plt = pyplot()
    widths = [case["q"] + case["c"] for case in cases]
    fig, axes = plt.subplots(1, len(cases), figsize=(11, 3.8), width_ratios=widths)
    for ax, case in zip(axes, cases):
        _panel(ax, case)
    fig.suptitle("Causal mask with a KV cache: q new queries sit at the last q of c + q slots "
                 "[causal_mask(q, c + q) of the s01 reference]", fontsize=10)
    fig.text(0.5, 0.01, "blue: may attend; grey: masked.  A square tril(q x q) is right only for the "
             "prefill (c = 0); with a cache the mask is tril(diagonal = c) of a q x (c + q) matrix",
             ha="center", fontsize=8, color=DECODE)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "causal_mask.png"))
