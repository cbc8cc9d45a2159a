"""The analysis (README, section "Analysis"): YOUR server and YOUR benchmark client at several
request rates, on request lengths from the course's ShareGPT-like trace, and goodput against rate.

    python analysis.py             # writes answers/slo_run.json and answers/goodput_rate.png,
                                   # prints every number of answers/slo_numbers.toml

The grader recomputes each number of answers/slo_numbers.toml from YOUR answers/slo_run.json with
its own formulas (the handout's), so write the numbers this script prints for your run.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATES = (2.0, 4.0, 8.0, 16.0, 32.0)      # requests per second
N = 16                                    # requests per rate
MAX_PROMPT, MAX_OUTPUT = 160, 48          # trace lengths clipped to what a CPU serves in seconds
SLO_TTFT_S, SLO_TPOT_S = 0.3, 0.04        # the SLOs goodput counts against (CPU scale)
MAX_MODEL_LEN = 256
SEED = 0


def course_root() -> Path:
    for root in (HERE, *HERE.parents):
        if (root / "datasets" / "models" / "course-llama" / "config.json").is_file():
            return root
    sys.exit("datasets/models/course-llama not found above this folder")


def workload(root: Path) -> tuple[list[list[int]], list[int]]:
    """Prompt ids and output lengths of the first N requests of datasets/traces/sharegpt.json,
    clipped to MAX_PROMPT and MAX_OUTPUT, prompts drawn from the vocabulary (seeded)."""
    import numpy as np

    trace = json.loads((root / "datasets" / "traces" / "sharegpt.json").read_text())["requests"][:N]
    rng = np.random.default_rng(SEED)
    prompts = [rng.integers(2, 8192, min(int(p), MAX_PROMPT)).tolist() for _, p, _ in trace]
    return prompts, [min(int(o), MAX_OUTPUT) for _, _, o in trace]


def serve(model: Path):
    """Your app under uvicorn in a thread of this process: (port, stop())."""
    import uvicorn
    from serving import ServerConfig, build_app

    app = build_app(ServerConfig(model, max_model_len=MAX_MODEL_LEN, engine={"num_kv_blocks": 256}))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
        sock.close()

    return sock.getsockname()[1], stop


def run() -> dict:
    """Every rate's records, as answers/slo_run.json holds them."""
    import torch
    from serving import BenchRequest, poisson_arrivals, run_benchmark

    torch.set_num_threads(1)
    root = course_root()
    prompts, outputs = workload(root)
    reqs = [BenchRequest(p, n) for p, n in zip(prompts, outputs)]
    port, stop = serve(root / "datasets" / "models" / "course-llama")
    runs = []
    try:
        asyncio.run(run_benchmark(f"http://127.0.0.1:{port}", "course-llama", reqs[:2], [0.0, 0.0]))  # warm-up
        for rate in RATES:
            arrivals = poisson_arrivals(rate, N, SEED)
            records = asyncio.run(run_benchmark(f"http://127.0.0.1:{port}", "course-llama", reqs, arrivals))
            runs.append({"rate": rate, "records": [[r.send_s, r.first_token_s, r.end_s, r.num_output_tokens,
                                                    r.num_prompt_tokens, r.ok] for r in records]})
    finally:
        stop()
    return {"slo": {"ttft_s": SLO_TTFT_S, "tpot_s": SLO_TPOT_S}, "runs": runs,
            "machine": f"{torch.get_num_threads()} CPU thread(s), torch {torch.__version__}"}


def numbers(data: dict) -> dict[str, float]:
    """The numbers of answers/slo_numbers.toml from a run, with your summarize."""
    from serving import SLO, RequestRecord, summarize

    slo = SLO(**data["slo"])
    out = {}
    for r in data["runs"]:
        s = summarize([RequestRecord(*rec) for rec in r["records"]], slo)
        out[f"goodput_at_{int(r['rate'])}"] = s.goodput
        if r["rate"] == max(RATES):
            out[f"ttft_p99_at_{int(r['rate'])}"] = s.ttft_p99
            out[f"tpot_p99_at_{int(r['rate'])}"] = s.tpot_p99
    return out


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from serving import SLO, RequestRecord, summarize

    slo = SLO(**data["slo"])
    rates = [r["rate"] for r in data["runs"]]
    sums = [summarize([RequestRecord(*rec) for rec in r["records"]], slo) for r in data["runs"]]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(rates, [s.request_throughput for s in sums], "o-", label="throughput (completed requests/s)")
    ax.plot(rates, [s.goodput for s in sums], "s-", label=f"goodput (TTFT <= {slo.ttft_s} s and TPOT <= {slo.tpot_s} s)")
    ax.plot(rates, rates, "k:", lw=0.8, label="offered rate")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("request rate (Poisson), requests/s")
    ax.set_ylabel("requests/s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    data = run()
    (HERE / "answers").mkdir(exist_ok=True)
    (HERE / "answers" / "slo_run.json").write_text(json.dumps(data, indent=1))
    plot(data, HERE / "answers" / "goodput_rate.png")
    for key, value in numbers(data).items():
        print(f"{key} = {value:.4g}")
