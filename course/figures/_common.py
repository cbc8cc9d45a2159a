"""Shared plumbing of the figure scripts: importing a reference solution, deterministic PNG output.

Every figure module exposes `data()` (the numbers it plots, computed from a named source) and
`draw(data, path)`; `build.py` runs them all. Nothing here holds a plotted number.
"""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"
PNG_DIR = Path(__file__).resolve().parent / "png"
DPI = 110

# One colour per role, reused across figures (matplotlib's tab10 palette).
SIGN, EXPONENT, MANTISSA = "#d62728", "#1f77b4", "#2ca02c"
PREFILL, DECODE, WAITING = "#ff7f0e", "#1f77b4", "#d9d9d9"


def reference(assignment: str, package: str) -> ModuleType:
    """Import `package` from solutions/<assignment> (the reference solution).

    If a module of that name is already loaded from elsewhere (an assignment stub, say), it is
    dropped first, so a figure never plots a student's or a stub's numbers.
    """
    root = SOLUTIONS / assignment
    if not (root / package).is_dir():
        raise FileNotFoundError(f"no reference package {package!r} under {root}")
    loaded = sys.modules.get(package)
    if loaded is not None and root not in Path(getattr(loaded, "__file__", "") or "/").resolve().parents:
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(package)


def pyplot():
    """matplotlib.pyplot on the Agg backend, with settings that make the output reproducible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "course-figures", "path.simplify": True, "font.size": 9})
    return plt


def save(fig, path: str | Path) -> Path:
    """Write `fig` as a palette PNG without a Software/date stamp (same bytes on every rebuild)."""
    plt = pyplot()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    try:  # a 256-colour palette PNG is a third of the RGBA size and looks the same for diagrams
        from PIL import Image  # a dependency of matplotlib
    except ImportError:
        out.write_bytes(buf.getvalue())
        return out
    Image.open(buf).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE).save(
        out, format="PNG", optimize=True
    )
    return out
