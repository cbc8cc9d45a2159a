"""Hidden: arrivals honoured (an idle engine waits, a late request gets no token before it arrives),
results in the trace's order when arrivals are not sorted; the timeline shades the stalled steps
(read back from the PNG's pixels: over half of a fully stalled plot is tinted, none of a clear one
-- measured 0.57 and 0)."""

import pytest
import torch
from conftest import pair_dirs

from autograder.testing import in_worker


@in_worker
def serve_arrivals(folder: str, requests: list) -> dict:
    import time

    from minivllm import LLM
    from specdec import TraceRequest, replay

    llm = LLM(folder, device="cpu", max_model_len=128, max_num_seqs=4, max_num_batched_tokens=64)
    t0 = time.perf_counter()
    result = replay(llm, [TraceRequest(a, tuple(p), m) for a, p, m in requests])
    return {"wall": time.perf_counter() - t0, "steps": [(s.start, s.end) for s in result.steps],
            "times": [list(t) for t in result.token_times]}


@pytest.mark.points(2)
def test_requests_are_served_only_after_they_arrive():
    target, _ = pair_dirs()
    g = torch.Generator().manual_seed(3)
    ids = lambda n: torch.randint(2, 8000, (n,), generator=g).tolist()
    requests = [(1.5, ids(10), 4), (0.25, ids(12), 5), (0.25, ids(8), 3)]
    run = serve_arrivals(target, requests)
    assert [len(t) for t in run["times"]] == [4, 5, 3], "token times in the trace's order, not the arrival order"
    assert run["steps"][0][0] >= 0.25, "an engine with nothing to do waits for the first arrival"
    for (arrival, _, _), times in zip(requests, run["times"], strict=True):
        assert times[0] >= arrival, f"a request arriving at {arrival} s got a token at {times[0]:.3f} s"
    # the two requests listed after the late one arrived at 0.25 s: they wait for no request listed
    # before them (a prefill of 20 tokens takes milliseconds; 1.25 s of margin for a loaded host)
    assert run["times"][1][0] < 1.5 and run["times"][2][0] < 1.5, (
        f"requests that arrived at 0.25 s got their first token at {run['times'][1][0]:.3f} s and "
        f"{run['times'][2][0]:.3f} s, not before the request listed first arrived (1.5 s): "
        "add every request that has arrived, not only a prefix of the trace")
    assert run["wall"] >= 1.5


@in_worker
def timeline_pixels(stalled: int) -> bytes:
    import os
    import tempfile

    from specdec import Replay, StepRecord, plot_timeline

    steps = tuple(StepRecord(0.1 * i, 0.1 * (i + 1), 0, 0, stalled) for i in range(10))  # no bars: shading only
    path = os.path.join(tempfile.mkdtemp(), "t.png")
    plot_timeline(Replay(steps, ((0.1, 0.2),)), path)
    with open(path, "rb") as f:
        return f.read()


def tinted_share(png: bytes) -> float:
    """Share of the image's pixels with the red shading's tint (light, red above green and blue alike)."""
    import io

    import matplotlib.image

    rgb = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return float(((r - g > 0.05) & (abs(g - b) < 0.03) & (g > 0.6)).mean())


def test_the_timeline_shades_the_stalled_steps_and_only_those():
    stalled, clear = tinted_share(timeline_pixels(2)), tinted_share(timeline_pixels(0))
    assert stalled > 0.2 and clear < 0.01, f"tinted share: {stalled:.3f} with every step stalled, {clear:.3f} with none"
