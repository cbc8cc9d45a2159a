"""Figure: how hard each GRPO loss type pushes on one token of each completion of a group, against
the completion's length: the original `grpo` divides by each completion's own length, so a long
wrong answer is penalised less per token; `bnpo` and `dr_grpo` weigh every token alike.

Source: the s15 reference (solutions/s15_posttraining/posttrain): `group_advantages` and the
gradient of `grpo_loss` (on-policy, beta 0) on the analysis group of analysis.py (lengths 3, 15, 5,
9; rewards 1, 0, 1, 0; max_completion_length 16). Belongs in course/stages/15-posttraining.md
("Why the length normalisation matters").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

LENGTHS = (3, 15, 5, 9)
REWARDS = (1.0, 0.0, 1.0, 0.0)
T = 16
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo")
COLOURS = {"grpo": "#d62728", "bnpo": "#1f77b4", "dr_grpo": "#2ca02c"}


def data() -> dict:
    import torch

    pt = reference("s15_posttraining", "posttrain")
    adv = pt.group_advantages(torch.tensor(REWARDS), len(REWARDS))
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).float()
    logps = -torch.ones(len(LENGTHS), T)
    out = {"advantages": adv.tolist(), "weights": {}}
    for loss_type in LOSS_TYPES:
        leaf = logps.clone().requires_grad_(True)
        config = pt.GRPOConfig(loss_type=loss_type, max_completion_length=T)
        (grad,) = torch.autograd.grad(pt.grpo_loss(leaf, logps.clone(), None, adv, mask, config), leaf)
        out["weights"][loss_type] = [float(grad[i, 0]) for i in range(len(LENGTHS))]  # d loss / d logp, token 0
    return out


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    order = sorted(range(len(LENGTHS)), key=lambda i: LENGTHS[i])
    width = 0.26
    for k, loss_type in enumerate(LOSS_TYPES):
        xs = [j + (k - 1) * width for j in range(len(order))]
        ys = [-d["weights"][loss_type][i] for i in order]  # -gradient: how much a step raises log p of the token
        ax.bar(xs, ys, width, color=COLOURS[loss_type], label=loss_type)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(order)), [f"{LENGTHS[i]} tokens\nreward {REWARDS[i]:g}, A = {d['advantages'][i]:+.2f}"
                                      for i in order], fontsize=8)
    ax.set_ylabel("-d loss / d log p (one token)")
    ax.set_title("GRPO's push on each token, by completion [s15 grpo_loss, on-policy, beta 0]", fontsize=10, loc="left")
    ax.legend(fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "grpo_length_weights.png"))
