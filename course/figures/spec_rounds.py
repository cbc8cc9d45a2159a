"""Figure: speculative decoding round by round: which drafts the target keeps, the token it adds,
tokens per target call against the paper's formula, and the kept tokens' distribution.

Source: the P7 reference (solutions/p7_specdec/specdec): `verify` (modified rejection sampling)
and `acceptance_rate` / `expected_tokens_per_call` (theory.py), on a toy pair: a target p and a
draft q over VOCAB tokens, the same at every position (so every draft is accepted with the same
probability alpha = sum min(p, q), the formula's assumption). Drafts are drawn from q with
torch.multinomial as `speculative_generate` draws them. Seeded. Belongs in
course/stages/08-quantization.md (speculative decoding, P7).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from course.figures._common import pyplot, reference, save

VOCAB, GAMMA, SHOWN_ROUNDS, ROUNDS, GAMMAS, SEED = 8, 4, 10, 400, (1, 2, 3, 4, 5, 6), 0
P_LOGITS = (2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5)
Q_LOGITS = (1.0, 2.0, 0.5, 1.0, 0.0, -1.0, -0.5, -2.0)
ACCEPTED, REJECTED, UNCHECKED, TARGET = "#2ca02c", "#d62728", "#e0e0e0", "#1f77b4"


def _specdec():
    for assignment, package in (("s01_transformer", "transformer"), ("s05_kvcache", "kvcache"),
                                ("p1_minivllm", "minivllm")):  # what specdec imports
        reference(assignment, package)
    return reference("p7_specdec", "specdec")


def pair() -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.softmax(torch.tensor(P_LOGITS), 0), torch.softmax(torch.tensor(Q_LOGITS), 0))


def _rounds(sd, p: torch.Tensor, q: torch.Tensor, gamma: int, n: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        drafts = torch.multinomial(q.expand(gamma, VOCAB), 1, generator=g)[:, 0]
        verdict = sd.verify(drafts, q.expand(gamma, VOCAB), p.expand(gamma + 1, VOCAB), g)
        out.append({"drafts": drafts.tolist(), "accepted": verdict.num_accepted, "tokens": list(verdict.tokens)})
    return out


def data() -> dict:
    sd = _specdec()
    p, q = pair()
    alpha = float(sd.acceptance_rate(p, q))
    sweep = {gm: _rounds(sd, p, q, gm, ROUNDS, SEED + gm) for gm in GAMMAS}
    first = np.bincount([r["tokens"][0] for r in sweep[GAMMA]], minlength=VOCAB) / ROUNDS
    return {"p": p.tolist(), "q": q.tolist(), "alpha": alpha, "shown": sweep[GAMMA][:SHOWN_ROUNDS],
            "tokens_per_call": {gm: float(np.mean([len(r["tokens"]) for r in rs])) for gm, rs in sweep.items()},
            "predicted": {gm: sd.expected_tokens_per_call(alpha, gm) for gm in GAMMAS},
            "first_token_freq": first.tolist()}


def _draw_rounds(ax, rounds: list[dict]) -> None:
    from matplotlib.patches import Rectangle

    n = len(rounds)
    for i, r in enumerate(rounds):
        y, kept = n - 1 - i, r["accepted"]
        for j, tok in enumerate(r["drafts"]):
            colour = ACCEPTED if j < kept else REJECTED if j == kept else UNCHECKED
            ax.add_patch(Rectangle((j, y - 0.4), 0.92, 0.8, color=colour))
            ax.text(j + 0.46, y, str(tok), ha="center", va="center", fontsize=7)
        ax.add_patch(Rectangle((GAMMA + 0.3, y - 0.4), 0.92, 0.8, color=TARGET))
        ax.text(GAMMA + 0.76, y, str(r["tokens"][-1]), ha="center", va="center", fontsize=7, color="w")
        ax.text(GAMMA + 1.4, y, f"+{len(r['tokens'])}", va="center", fontsize=7)
    ax.set_xlim(0, GAMMA + 2.1)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_yticks(range(n), [f"round {n - k}" for k in range(n)], fontsize=7)
    ax.set_xticks([i + 0.46 for i in range(GAMMA)] + [GAMMA + 0.76], [f"d{i + 1}" for i in range(GAMMA)] + ["target"],
                  fontsize=7)
    ax.set_title(f"gamma = {GAMMA}: green kept, red rejected (the target\nresamples there), grey never checked",
                 fontsize=8.5, loc="left")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.7), gridspec_kw={"width_ratios": [1, 1, 1]})
    _draw_rounds(axes[0], d["shown"])
    ax = axes[1]
    gammas = list(d["predicted"])
    ax.plot(gammas, list(d["predicted"].values()), "k-", label="(1 - a^(g+1)) / (1 - a)")
    ax.plot(gammas, list(d["tokens_per_call"].values()), "o", color=TARGET, label=f"measured, {ROUNDS} rounds each")
    ax.set_xlabel("gamma (drafts per round)")
    ax.set_ylabel("tokens per target call")
    ax.set_title(f"alpha = sum min(p, q) = {d['alpha']:.3f}", fontsize=8.5, loc="left")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[2]
    v = np.arange(VOCAB)
    ax.bar(v - 0.27, d["q"], 0.27, color="#bbbbbb", label="draft q")
    ax.bar(v, d["p"], 0.27, color="k", label="target p")
    ax.bar(v + 0.27, d["first_token_freq"], 0.27, color=TARGET, label=f"first kept token ({ROUNDS} rounds)")
    ax.set_xticks(v)
    ax.set_xlabel("token")
    ax.set_ylabel("probability")
    ax.set_title("kept tokens follow p, not q", fontsize=8.5, loc="left")
    ax.legend(fontsize=7)
    fig.suptitle("Speculative decoding on a toy pair (same p and q at every position) [p7 specdec verify]",
                 fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "spec_rounds.png"))
