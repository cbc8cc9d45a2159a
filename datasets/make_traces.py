"""Write the committed request traces (datasets/traces/*.json) from their seeded generators.

    python datasets/make_traces.py [--check]

The generators live in coursedata/traces.py; --check fails if a committed file differs from
what its generator makes now.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from coursedata.traces import GENERATORS, generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    out = HERE / "traces"
    out.mkdir(exist_ok=True)
    stale = []
    for name in GENERATORS:
        trace = generate(name)
        path = out / f"{name}.json"
        text = trace.to_json()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        path.write_text(text)
        total = sum(r.prompt_len + r.output_len for r in trace.requests)
        print(f"{name:12s} {len(trace):5d} requests  {total:>9,d} tokens  -> {path.name}")
    if stale:
        raise SystemExit(f"traces differ from their generators: {stale}")


if __name__ == "__main__":
    main()
