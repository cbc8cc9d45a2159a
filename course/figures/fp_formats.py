"""Figure: bit layouts of fp32, bf16, fp16, fp8 e4m3fn and fp8 e5m2, with pi encoded in each.

Source: the FloatFormat definitions of the s00 reference (solutions/s00_hardware/hwnumerics/
formats.py) for the four narrow formats, and their `to_bits` encoder for the example value;
fp32 (which FloatFormat cannot describe: it allows at most 22 mantissa bits) comes from
IEEE 754 binary32 as numpy reports it (`numpy.finfo(numpy.float32)`), and its pattern from
the float32 bits themselves. Belongs in course/stages/00-hardware.md, next to the float-value
and unit-roundoff rows of "Key formulas".
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from matplotlib.patches import Patch

from course.figures._common import EXPONENT, MANTISSA, SIGN, pyplot, reference, save

EXAMPLE = math.pi  # the value whose bits fill the boxes


def _row(name: str, exp_bits: int, man_bits: int, bits: int, max_finite: float, min_normal: float) -> dict:
    width = 1 + exp_bits + man_bits
    return {
        "name": name, "exp_bits": exp_bits, "man_bits": man_bits, "width": width,
        "bias": 2 ** (exp_bits - 1) - 1, "eps": 2.0**-man_bits, "max_finite": max_finite,
        "min_normal": min_normal, "bits": bits,
        "pattern": format(bits, f"0{width}b"),
    }


def data() -> list[dict]:
    """One dict per format, widest first: field widths, bias, eps, range, and pi's bit pattern."""
    hw = reference("s00_hardware", "hwnumerics")
    fi = np.finfo(np.float32)
    x = torch.tensor([EXAMPLE], dtype=torch.float32)
    rows = [_row("fp32", int(fi.nexp), int(fi.nmant), int(x.view(torch.int32).item()) & 0xFFFFFFFF,
                 float(fi.max), float(fi.smallest_normal))]
    for fmt in (hw.BF16, hw.FP16, hw.FP8_E4M3, hw.FP8_E5M2):
        bits = int(hw.to_bits(x, fmt).item())
        rows.append(_row(fmt.name, fmt.exp_bits, fmt.man_bits, bits, fmt.max_finite, fmt.min_normal))
    for row in rows:
        row["value"] = _decode(row)
    return rows


def _decode(row: dict) -> float:
    """The value of a normal pattern: (-1)^s 2^(e - bias) 1.f (the example is a normal number)."""
    p, m = row["pattern"], row["man_bits"]
    exp_field = int(p[1 : 1 + row["exp_bits"]], 2)
    frac = int(p[1 + row["exp_bits"] :], 2) / 2**m
    return (-1) ** int(p[0]) * 2.0 ** (exp_field - row["bias"]) * (1 + frac)


def draw(rows: list[dict], path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 0.62 * len(rows) + 1.0))
    for r, row in enumerate(rows):
        y = len(rows) - 1 - r
        for i, bit in enumerate(row["pattern"]):
            color = SIGN if i == 0 else EXPONENT if i <= row["exp_bits"] else MANTISSA
            ax.add_patch(plt.Rectangle((i, y), 1, 0.8, facecolor=color, alpha=0.35, edgecolor="k", lw=0.6))
            ax.text(i + 0.5, y + 0.4, bit, ha="center", va="center", fontsize=8, family="monospace")
        label = f"{row['name']}  (1, {row['exp_bits']}, {row['man_bits']})"
        ax.text(-0.4, y + 0.4, label, ha="right", va="center", fontsize=9, weight="bold")
        note = (f"bias {row['bias']}, eps 2^-{row['man_bits']}, max {row['max_finite']:.4g},\n"
                f"min normal 2^{math.log2(row['min_normal']):.0f};  pi -> {row['value']:.8g}")
        ax.text(32.6, y + 0.4, note, ha="left", va="center", fontsize=8)
    handles = [Patch(facecolor=c, alpha=0.35, edgecolor="k", label=n)
               for c, n in ((SIGN, "sign"), (EXPONENT, "exponent"), (MANTISSA, "mantissa (fraction)"))]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)
    ax.set_xlim(-8.5, 49)
    ax.set_ylim(-0.2, len(rows))
    ax.axis("off")
    ax.set_title(f"Bit layouts, with pi = {EXAMPLE:.7f} rounded to nearest even in each format "
                 "(value = (-1)^s 2^(e - bias) 1.f)")
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "fp_formats.png"))
