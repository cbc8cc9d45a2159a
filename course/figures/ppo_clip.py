"""Figure: PPO's clipped surrogate for one token as a function of the probability ratio, for a
positive and a negative advantage, with its gradient: flat (zero gradient) beyond 1 + eps when
A > 0 and below 1 - eps when A < 0, and unclipped on the other side, where the step is undone.

Source: the s15 reference (solutions/s15_posttraining/posttrain): `ppo_policy_loss` and its
gradient on a grid of ratios (eps 0.2, A = +1 and -1, one token). Belongs in
course/stages/15-posttraining.md ("PPO's clipped objective").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

EPS = 0.2
RATIOS = tuple(round(0.4 + 0.01 * i, 2) for i in range(121))  # 0.40 .. 1.60


def data() -> dict:
    import torch

    pt = reference("s15_posttraining", "posttrain")
    out = {}
    for adv in (1.0, -1.0):
        objective, slope = [], []
        for r in RATIOS:
            leaf = torch.tensor([[float(torch.log(torch.tensor(r)))]], requires_grad=True)
            loss = pt.ppo_policy_loss(leaf, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1), EPS)
            (grad,) = torch.autograd.grad(loss, leaf)
            objective.append(-float(loss.detach()))
            slope.append(-float(grad) / r)  # d objective / d ratio = (d/d log r) / r
        out[adv] = {"objective": objective, "slope": slope}
    return out


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, adv in zip(axes, (1.0, -1.0)):
        ax.plot(RATIOS, [r * adv for r in RATIOS], color="#999999", ls="--", lw=1, label="unclipped r A")
        ax.plot(RATIOS, d[adv]["objective"], color="#1f77b4" if adv > 0 else "#d62728", lw=2, label="clipped objective")
        for edge in (1 - EPS, 1 + EPS):
            ax.axvline(edge, color="k", lw=0.5, ls=":")
        ax.set_title(f"A = {adv:+g}: flat {'above 1 + eps' if adv > 0 else 'below 1 - eps'}", fontsize=9, loc="left")
        ax.set_xlabel("ratio r = pi / pi_old")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("objective (to maximise)")
    axes[0].legend(fontsize=8, frameon=False)
    fig.suptitle(f"PPO's clipped surrogate, eps = {EPS} [s15 ppo_policy_loss]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "ppo_clip.png"))
