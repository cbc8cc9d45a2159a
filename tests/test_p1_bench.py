"""P1's bench beside vLLM: the figure carries a vLLM bar and the ratio to it, and `--vllm` where vLLM
is not installed (every course environment: it lives in gpu_runners/Dockerfile.vllm) stops with the
image to use. The vLLM run itself has not been made here: no environment of the course has vLLM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

P1 = Path(__file__).resolve().parents[1] / "solutions" / "p1_minivllm"


@pytest.fixture
def bench_plot(monkeypatch):
    monkeypatch.syspath_prepend(str(P1))
    import bench_plot

    return bench_plot


def test_the_figure_draws_vllm_beside_hf_with_both_ratios(bench_plot):
    run = bench_plot.BenchRun(hardware="NVIDIA H200", settings="128 requests", engine_tok_s=12000.0,
                              ttft_s=[0.1, 0.3], tpot_s=[0.005], hf_tok_s=500.0, vllm_tok_s=24000.0)
    fig = bench_plot.figure(run)
    throughput = fig.axes[0]
    assert [t.get_text() for t in throughput.get_yticklabels()] == ["HF generate", "vLLM", "minivllm"]
    assert throughput.get_title() == "throughput: 24.0x HF, 0.5x vLLM"
    with pytest.raises(ValueError, match="vLLM -1"):
        bench_plot.BenchRun(hardware="", settings="", engine_tok_s=1.0, ttft_s=[0.1], vllm_tok_s=-1.0)


def test_vllm_flag_without_vllm_names_the_image_to_use():
    args = ["--vllm", "--no-hf", "--num-requests", "2", "--min-len", "4", "--max-len", "8"]
    given = f"{P1.parent / 's05_kvcache'}:{P1.parent / 's01_transformer'}"  # P1's given packages
    run = subprocess.run([sys.executable, str(P1 / "bench.py"), *args], capture_output=True, text=True,
                         timeout=300, cwd=P1, check=False, env=os.environ | {"PYTHONPATH": f"{P1}:{given}"})
    assert run.returncode != 0 and "gpu_runners/Dockerfile.vllm" in run.stderr, run.stdout + run.stderr
    assert "minivllm:" in run.stdout  # the engine ran first; only the vLLM part needs the other image
