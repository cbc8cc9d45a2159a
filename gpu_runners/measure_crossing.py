"""What a CUDA tensor costs to cross from the judge to the worker: host bounce vs CUDA IPC handle.

Run on a GPU machine from the repo root: `PYTHONPATH=. python gpu_runners/measure_crossing.py`.
Prints one line per size: the median time of a call that takes the tensor and returns nothing,
with the tensor crossing through host memory and by IPC handle, minus an empty call.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from autograder.judge import importer, plugin
from autograder.judge.client import WorkerClient
from autograder.protocol import data

SIZES_MB = (1, 16, 64, 256)
REPS = 15


def _median_s(fn, reps: int = REPS) -> float:
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    root = Path(tempfile.mkdtemp())
    (root / "crosspkg").mkdir()
    (root / "crosspkg" / "__init__.py").write_text("def take(x=None):\n    return None\n")
    os.chdir(root)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), str(Path(__file__).resolve().parent.parent)])
    client = WorkerClient("crosspkg")
    importer.install("crosspkg", client)
    plugin._client = client
    client.start()
    import crosspkg

    empty = _median_s(lambda: crosspkg.take())
    print(f"empty call: {empty * 1e6:.0f} us", flush=True)
    for mb in SIZES_MB:
        x = torch.randn(mb << 18, device="cuda")  # float32: 4 bytes each
        row = []
        for label, threshold in (("host", 1 << 62), ("ipc", 1 << 20)):
            data.IPC_MIN_BYTES = threshold
            crosspkg.take(x)  # warm: the worker's CUDA context, the judge's pool
            row.append(f"{label} {(_median_s(lambda: crosspkg.take(x)) - empty) * 1e3:8.2f} ms")
        print(f"{mb:4d} MB: " + "   ".join(row), flush=True)
    client.kill()


if __name__ == "__main__":
    sys.exit(main())
