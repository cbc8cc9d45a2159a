"""Plot the training and eval loss of both course models from their CSV logs.

    python datasets/plot_loss.py [--logs datasets/training] [--out datasets/training/loss_curve.png]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("course-llama", "course-llama-draft")


def read_log(path: Path) -> dict[str, np.ndarray]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    col = lambda k: np.array([float(r[k]) if r[k] else np.nan for r in rows])  # noqa: E731
    return {k: col(k) for k in ("step", "tokens", "train_ce", "eval_loss")}


def smooth(y: np.ndarray, window: int = 50) -> np.ndarray:
    """Trailing moving average (the per-step loss of one batch is noisy)."""
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = np.empty_like(y)
    for i in range(len(y)):
        lo = max(0, i + 1 - window)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def plot(logs: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for name, color in zip(MODELS, ("tab:blue", "tab:orange")):
        log = read_log(logs / f"{name}_loss.csv")
        tokens_m = log["tokens"] / 1e6
        ax.plot(tokens_m, smooth(log["train_ce"]), color=color, lw=1, alpha=0.6,
                label=f"{name} train (cross-entropy, 50-step mean)")
        has_eval = ~np.isnan(log["eval_loss"])
        ax.plot(tokens_m[has_eval], log["eval_loss"][has_eval], color=color, lw=2,
                label=f"{name} eval")
        best = np.nanargmin(log["eval_loss"])
        ax.scatter([tokens_m[best]], [log["eval_loss"][best]], color=color, zorder=3, s=30)
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("loss (nats / token)")
    ax.set_ylim(1.0, 6.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("course-llama (11.0M) and course-llama-draft (2.75M, distilled); dot = kept checkpoint",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=Path, default=HERE / "training")
    parser.add_argument("--out", type=Path, default=HERE / "training" / "loss_curve.png")
    args = parser.parse_args()
    plot(args.logs, args.out)
    print(args.out)


if __name__ == "__main__":
    main()
