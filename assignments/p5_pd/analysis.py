"""The analysis (README, section "Analysis"): YOUR prefill and decode workers timed on this machine,
latency models fitted to the timings, and the placement they choose for the course's trace.

    python analysis.py                  # writes answers/pd_run.json, prints every placement's
                                        # goodput and the numbers of answers/pd_numbers.toml
    python analysis.py --transfer 0.15  # no timing: answers/pd_run.json's points refitted with
                                        # transfer_per_token_s = 0.15 x the prefill slope, the
                                        # same question asked again (for answers/pd_placement.md)

What is timed, on the course model in fp32 on the CPU, one thread:
- prefill: `PrefillWorker.prefill` of one prompt of 16, 32, 64, 128 and 192 tokens; the median
  of 5 runs each, after one warm-up (a fresh random prompt every run: nothing hits a cache);
- decode: `DecodeWorker.step` with 1, 2, 4, 8 and 16 running sequences (each admitted from a
  KVMessage of the prefill worker, DECODE_PROMPT_LEN prompt tokens, max_tokens large enough that
  none finishes while timed); the median over 8 steps, after one warm-up step.

The placement question, derived from the fitted model so that it scales with the machine:
- trace: the first 200 requests of datasets/traces/sharegpt.json, prompt_len cut to 192 and
  output_len to 64 (min with those), arrivals as they are (`at_rate` rescales them);
- SLOs: TTFT <= 5 x prefill_s(the trace's median prompt_len), TPOT <= 3 x decode_s(8);
- rates: capacity x 2 ** (k / 4) for k = -8 .. 8 (a quarter to four times capacity, 17 rates),
  capacity = 1 / prefill_s(the trace's mean prompt_len), one prefill instance's request rate;
- every SLO and rate rounded to 3 significant digits; up to 4 GPUs, max_decode_batch 16, target 0.9.

The grader reads YOUR answers/pd_run.json, checks that it holds the trace, SLOs and rates these
rules give for its own points, refits the points with its own least squares and reruns the
placement with its own simulator: write the numbers this script prints for your run.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = "p5_pd.pd_run/1"
SEED = 0
VOCAB = 8192                              # token ids drawn in [2, VOCAB): 0 and 1 are EOS and padding
PREFILL_LENGTHS = (16, 32, 64, 128, 192)  # prompt tokens
PREFILL_RUNS = 5                          # timed runs per length (after one warm-up)
DECODE_BATCHES = (1, 2, 4, 8, 16)         # running sequences
DECODE_STEPS = 8                          # timed steps per batch (after one warm-up step)
DECODE_PROMPT_LEN = 64                    # each decoding sequence's prompt
DECODE_MAX_TOKENS = DECODE_STEPS + 8      # none finishes: 1 (prefill) + 1 (warm-up) + 8 < 16
ENGINE = {"block_size": 16, "num_kv_blocks": 256, "max_model_len": 256, "dtype": "float32", "device": "cpu",
          "enable_prefix_caching": False}        # both workers; no prefix cache: every run computes
TRACE = {"name": "sharegpt", "num_requests": 200, "max_prompt_len": 192, "max_output_len": 64}
TTFT_SLO_X, TPOT_SLO_X, TPOT_SLO_BATCH = 5.0, 3.0, 8
RATE_EXPONENTS = tuple(k / 4 for k in range(-8, 9))
NUM_GPUS, MAX_DECODE_BATCH, TARGET = 4, 16, 0.9


def model_dir() -> Path:
    from autograder.testing import course_model_dir

    folder = course_model_dir("course-llama")
    if folder is None:
        sys.exit("datasets/models/course-llama not found (see the course README: build the course model)")
    return folder


def random_prompt(g, n: int) -> tuple[int, ...]:
    import torch

    return tuple(torch.randint(2, VOCAB, (n,), generator=g).tolist())


def time_prefill(model: Path, g) -> list[list[float]]:
    """[[prompt tokens, median seconds of one PrefillWorker.prefill]] for PREFILL_LENGTHS."""
    from disagg import PrefillRequest, PrefillWorker

    worker = PrefillWorker(model, **ENGINE)
    worker.prefill([PrefillRequest(0, random_prompt(g, PREFILL_LENGTHS[-1]))])  # warm-up
    points, rid = [], 1
    for n in PREFILL_LENGTHS:
        worker.prefill([PrefillRequest(rid, random_prompt(g, n))])  # warm-up at this length
        rid += 1
        times = []
        for _ in range(PREFILL_RUNS):
            request = PrefillRequest(rid, random_prompt(g, n))
            rid += 1
            t0 = time.perf_counter()
            worker.prefill([request])
            times.append(time.perf_counter() - t0)
        points.append([n, statistics.median(times)])
    return points


def time_decode(model: Path, g) -> list[list[float]]:
    """[[batch, median seconds of one DecodeWorker.step]] for DECODE_BATCHES."""
    from disagg import DecodeWorker, PrefillRequest, PrefillWorker

    prefill, decode = PrefillWorker(model, **ENGINE), DecodeWorker(model, **ENGINE)
    points, rid = [], 0
    for b in DECODE_BATCHES:
        ids = list(range(rid, rid + b))
        rid += b
        prompts = [random_prompt(g, DECODE_PROMPT_LEN) for _ in ids]
        for i, p in zip(ids, prompts):
            decode.reserve(i, p, DECODE_MAX_TOKENS, ignore_eos=True)
        for message in prefill.prefill([PrefillRequest(i, p) for i, p in zip(ids, prompts)]):
            if decode.admit(message) is not None:
                sys.exit(f"request {message.request_id} finished at admission: check DecodeWorker.admit")
        decode.step()  # warm-up
        times = []
        for _ in range(DECODE_STEPS):
            t0 = time.perf_counter()
            finished = decode.step()
            times.append(time.perf_counter() - t0)
            if finished:
                sys.exit(f"requests {[o.request_id for o in finished]} finished while timed: check DecodeWorker.step")
        points.append([b, statistics.median(times)])
        for i in ids:
            decode.abort(i)
    return points


def sig3(x: float) -> float:
    """x rounded to 3 significant digits."""
    return float(f"{x:.3g}")


def trace_requests() -> list:
    """TRACE's requests as SimRequests: the first num_requests, lengths cut."""
    from disagg import SimRequest

    import coursedata

    trace = coursedata.load_trace(TRACE["name"]).requests[:TRACE["num_requests"]]
    return [SimRequest(r.arrival_s, min(r.prompt_len, TRACE["max_prompt_len"]),
                       min(r.output_len, TRACE["max_output_len"])) for r in trace]


def question(model, reqs: list) -> tuple[dict, list[float]]:
    """The SLOs and the rate grid, from the fitted model and the trace (the module docstring's rules)."""
    prompts = [r.prompt_len for r in reqs]
    slo = {"ttft_s": sig3(TTFT_SLO_X * model.prefill_s(statistics.median(prompts))),
           "tpot_s": sig3(TPOT_SLO_X * model.decode_s(TPOT_SLO_BATCH))}
    capacity = 1.0 / model.prefill_s(statistics.mean(prompts))
    return slo, [sig3(capacity * 2 ** e) for e in RATE_EXPONENTS]


def measure() -> dict:
    """Time the workers; the run as answers/pd_run.json holds it (the question filled in later)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = model_dir()
    g = torch.Generator().manual_seed(SEED)
    with torch.inference_mode():
        prefill_points = time_prefill(model, g)
        decode_points = time_decode(model, g)
    machine = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
               "python": platform.python_version(), "torch": torch.__version__,
               "threads": torch.get_num_threads()}
    return {"schema": SCHEMA, "machine": machine, "prefill_points": prefill_points, "decode_points": decode_points}


def place(run: dict, transfer_x: float = 0.0) -> tuple[object, list]:
    """Fill the run's trace, SLOs and rates; the fitted model and best_placement's results. The
    question comes from the fit without transfer; transfer_x > 0 then prices the transfer at
    transfer_x x the fitted prefill slope a token."""
    from disagg import SLO, best_placement, fit_latency_model

    model = fit_latency_model(run["prefill_points"], run["decode_points"])
    reqs = trace_requests()
    slo, rates = question(model, reqs)
    if transfer_x:
        model = fit_latency_model(run["prefill_points"], run["decode_points"], transfer_x * model.prefill_per_token_s)
    run.update(trace=dict(TRACE), slo=slo, rates=rates, num_gpus=NUM_GPUS, max_decode_batch=MAX_DECODE_BATCH)
    results = best_placement(reqs, model, SLO(**slo), NUM_GPUS, rates, MAX_DECODE_BATCH, TARGET)
    return model, results


def report(run: dict, model, results: list) -> None:
    print(f"machine: {run['machine']['processor']}, {run['machine']['platform']}, torch {run['machine']['torch']}")
    print("prefill (tokens, ms): " + ", ".join(f"({n}, {s * 1e3:.2f})" for n, s in run["prefill_points"]))
    print("decode  (batch, ms):  " + ", ".join(f"({b}, {s * 1e3:.2f})" for b, s in run["decode_points"]))
    print(f"fit: prefill {model.prefill_base_s * 1e3:.3f} ms + {model.prefill_per_token_s * 1e3:.4f} ms/token, "
          f"decode {model.decode_base_s * 1e3:.3f} ms + {model.decode_per_seq_s * 1e3:.4f} ms/sequence")
    if model.transfer_per_token_s:
        print(f"transfer: {model.transfer_per_token_s * 1e6:.4g} us/token")
    print(f"SLOs: TTFT <= {run['slo']['ttft_s']} s, TPOT <= {run['slo']['tpot_s']} s; "
          f"rates (requests/s): {run['rates']}")
    print(f"\n{'prefill':>7} {'decode':>6} {'GPUs':>4} {'goodput':>9} {'per GPU':>9}")
    for r in results:
        p = r.placement
        print(f"{p.num_prefill:>7} {p.num_decode:>6} {p.num_gpus:>4} {r.goodput:>9.4g} {r.per_gpu:>9.4g}")
    if model.transfer_per_token_s:
        print("\n(with a transfer cost: for answers/pd_placement.md, not answers/pd_numbers.toml)")
        return
    best = results[0]
    one_one = next(r for r in results if (r.placement.num_prefill, r.placement.num_decode) == (1, 1))
    print("\nanswers/pd_numbers.toml:")
    print(f"prefill_per_token_ms = {model.prefill_per_token_s * 1e3:.6g}")
    print(f"decode_per_seq_ms = {model.decode_per_seq_s * 1e3:.6g}")
    print(f"best_num_prefill = {best.placement.num_prefill}")
    print(f"best_num_decode = {best.placement.num_decode}")
    print(f"best_per_gpu = {best.per_gpu:.6g}")
    print(f"one_one_per_gpu = {one_one.per_gpu:.6g}")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transfer", type=float, default=0.0, metavar="X",
                        help="rerun the placement of answers/pd_run.json with a KV transfer of X x the prefill slope")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.transfer:
        run = json.loads((HERE / "answers" / "pd_run.json").read_text())
        model, results = place(run, args.transfer)
        report(run, model, results)
        return
    run = measure()
    model, results = place(run)
    (HERE / "answers").mkdir(exist_ok=True)
    (HERE / "answers" / "pd_run.json").write_text(json.dumps(run, indent=1) + "\n")
    report(run, model, results)


if __name__ == "__main__":
    main()
