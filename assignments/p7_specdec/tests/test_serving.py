"""replay, latency_stats and plot_timeline: a trace served by the P1 engine on the course model (CPU, float32),
checked against the engine's own greedy outputs and the step records against each other; the
statistics against numpy on a replay built here."""

import itertools

import numpy as np
import pytest
import torch
from conftest import pair_dirs
from specdec import LatencyStats, Replay, StepRecord, latency_stats

from autograder.testing import in_worker


def trace(seed: int = 0, shape=((12, 20), (200, 6), (16, 20), (180, 6))) -> list[tuple[float, list[int], int]]:
    g = torch.Generator().manual_seed(seed)
    return [(0.0, torch.randint(2, 8000, (n,), generator=g).tolist(), m) for n, m in shape]


@in_worker
def serve(folder: str, requests: list, policy: str, chunked: bool, budget: int) -> dict:
    """In the worker: the P1 engine replaying `requests`; the replay and the engine's own greedy tokens."""
    from minivllm import LLM, SamplingParams
    from specdec import TraceRequest, replay

    def engine():
        return LLM(folder, device="cpu", max_model_len=256, max_num_seqs=8, max_num_batched_tokens=budget,
                   enable_chunked_prefill=chunked, scheduling_policy=policy, enable_prefix_caching=False)

    llm = engine()
    marker = lambda _llm, _batch: None
    llm.on_step = marker
    result = replay(llm, [TraceRequest(a, tuple(p), m) for a, p, m in requests])
    outs = engine().generate([p for _, p, _ in requests],
                             [SamplingParams(temperature=0, max_tokens=m, ignore_eos=True) for _, _, m in requests])
    return {"steps": [(s.start, s.end, s.prefill_tokens, s.decode_tokens, s.stalled) for s in result.steps],
            "times": [list(t) for t in result.token_times], "hook_restored": llm.on_step is marker,
            "lengths": [len(o.outputs[0].token_ids) for o in outs]}


def check_consistent(run: dict, requests) -> None:
    steps, times = run["steps"], run["times"]
    assert [len(t) for t in times] == [m for _, _, m in requests] == run["lengths"]
    ends = [s[1] for s in steps]
    assert all(a <= b for a, b in itertools.pairwise(ends)) and all(s[0] <= s[1] for s in steps)
    assert sum(s[2] for s in steps) == sum(len(p) for _, p, _ in requests), "every prompt token prefilled once"
    assert sum(s[3] for s in steps) == sum(m - 1 for _, _, m in requests), "one decode token per later token"
    for k, (start, end, _, _, stalled) in enumerate(steps):
        got = {i for i, t in enumerate(times) if end in t}
        waiting = {i for i, t in enumerate(times) if sum(x < end for x in t) >= 1 and sum(x < end for x in t) < len(t)}
        assert stalled == len(waiting - got), f"step {k}: stalled {stalled}, the token times say {len(waiting - got)}"


@pytest.mark.points(2)
def test_replay_records_every_token_and_step_with_chunking():
    target, _ = pair_dirs()
    requests = trace()
    run = serve(target, requests, "decode_first", True, 64)
    check_consistent(run, requests)
    assert run["hook_restored"], "replay must put back the on_step hook it found"
    assert all(s[4] == 0 for s in run["steps"]), "decode-first with chunks never leaves a running decode behind"


@pytest.mark.points(2)
def test_prefill_first_stalls_the_running_decodes():
    target, _ = pair_dirs()
    requests = trace(1)
    run = serve(target, requests, "prefill_first", False, 256)
    check_consistent(run, requests)
    assert sum(s[4] for s in run["steps"]) > 0, "the long prompts' prefills must stall the short requests' decodes"


def test_latency_stats_match_numpy(tol):
    times = ((0.1, 0.2, 0.35, 0.4), (0.5, 0.9), (1.0,), (0.3, 0.31, 0.32, 0.9, 1.2))
    result = Replay((StepRecord(0.0, 1.2, 0, 0, 0),), times)
    got = latency_stats(result)
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t in times if len(t) > 1]
    gaps = np.concatenate([np.diff(t) for t in times if len(t) > 1])
    want = LatencyStats(np.percentile(tpot, 50), np.percentile(tpot, 99), np.percentile(gaps, 99), gaps.max(), 12 / 1.2)
    for name in ("tpot_p50", "tpot_p99", "itl_p99", "itl_max", "throughput"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), rel=tol("formulas")["rtol"]), name


def test_latency_stats_refuse_a_replay_without_a_second_token():
    with pytest.raises(ValueError):
        latency_stats(Replay((), ((0.1,), (0.2,))))
    one_more = latency_stats(Replay((StepRecord(0.0, 1.0, 0, 0, 0),), ((0.1,), (0.2, 0.5))))
    assert abs(one_more.tpot_p50 - 0.3) < 1e-9, "one request with a second token: its TPOT, 0.3 s"


@in_worker
def timeline_png(steps: list, times: list) -> bytes:
    import os
    import tempfile

    from specdec import Replay, StepRecord, plot_timeline

    path = os.path.join(tempfile.mkdtemp(), "t.png")
    plot_timeline(Replay(tuple(StepRecord(*s) for s in steps), tuple(tuple(t) for t in times)), path, "test")
    with open(path, "rb") as f:
        return f.read()


def test_timeline_is_a_png():
    data = timeline_png([(0.0, 0.1, 64, 0, 0), (0.1, 0.15, 30, 2, 0), (0.15, 0.3, 200, 0, 2)], [[0.15], [0.15]])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
