"""s03's two-GPU sweep (solutions/s03_collectives/busbw_gpus.py): its bandwidths follow nccl-tests'
definitions, its plot draws the NVLink ceiling, and with fewer than two GPUs it says so and stops.
On two or more GPUs a short sweep runs; the full one is a GPU job (issue 25)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

S03 = Path(__file__).resolve().parents[1] / "solutions" / "s03_collectives"


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(S03))
    import busbw_gpus

    return busbw_gpus


def test_bandwidths_are_nccl_tests_definitions(sweep):
    records = [{"world": 2, "impl": "nccl", "bytes": 1 << 30, "times_s": [0.004, 0.005, 0.006]},
               {"world": 2, "impl": "ring", "bytes": 1 << 30, "times_s": [0.010]}]
    nccl, ring = sweep.rows(records)
    assert nccl["median_s"] == 0.005 and nccl["algbw_gbs"] == pytest.approx((1 << 30) / 0.005 / 1e9, rel=1e-12)
    assert nccl["busbw_gbs"] == pytest.approx(nccl["algbw_gbs"] * 2 * (2 - 1) / 2, rel=1e-12)  # 2(n-1)/n
    assert ring["busbw_gbs"] == pytest.approx((1 << 30) / 0.010 / 1e9, rel=1e-12)


def test_the_plot_draws_the_nvlink_ceiling_per_direction(sweep, tmp_path):
    assert sweep.nvlink_per_direction_gbs("NVIDIA H200") == 450.0  # 900 GB/s both directions
    assert sweep.nvlink_per_direction_gbs("NVIDIA A10") is None
    records = [{"world": 2, "impl": impl, "bytes": s, "times_s": [s / 3e11]} for impl in sweep.IMPLS
               for s in sweep.SIZES[:3]]
    path = tmp_path / "sweep.png"
    sweep.plot({"device": "NVIDIA H200", "torch": "2.11.0", "nccl": "2.27.5", "records": records}, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sweep_runs_on_two_gpus_and_stops_with_a_reason_on_fewer(tmp_path):
    import torch

    out = tmp_path / "sweep.json"
    run = subprocess.run([sys.executable, str(S03 / "busbw_gpus.py"), "--max-mib", "0.0625", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=S03, check=False)
    if torch.cuda.device_count() >= 2:  # 4 KiB to 64 KiB on every GPU of the machine
        assert run.returncode == 0 and out.is_file() and out.with_suffix(".png").is_file(), run.stderr
    else:
        assert run.returncode != 0 and "needs 2 or more GPUs" in run.stderr, run.stderr
        assert not out.exists()
