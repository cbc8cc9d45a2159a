"""Rebuild every figure (or the ones named) into course/figures/png/.

    python -m course.figures                 # all
    python -m course.figures roofline --out /tmp/figs
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from course.figures import FIGURES
from course.figures._common import PNG_DIR


def build(name: str, out_dir: Path) -> Path:
    """Compute one figure's data and draw it to out_dir/<name>.png."""
    module = importlib.import_module(f"course.figures.{name}")
    return module.draw(module.data(), out_dir / f"{name}.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help="any of: " + ", ".join(FIGURES))
    parser.add_argument("--out", type=Path, default=PNG_DIR)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(FIGURES))
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; known: {', '.join(FIGURES)}")
    start = time.perf_counter()
    for name in args.names or FIGURES:
        t0 = time.perf_counter()
        path = build(name, args.out)
        print(f"{path}  {path.stat().st_size / 1024:6.1f} KiB  {time.perf_counter() - t0:5.2f} s")
    print(f"built {len(args.names or FIGURES)} figures in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
