"""The judge/worker split piece by piece: the wire refuses objects, tensors arrive as private copies,
proxies compare by identity, the judge's clock catches a timer that under-reports, the judge
cannot be ptraced, and the worker side of the grader imports nothing of the judge's."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autograder.judge import bracket, importer, this_run
from autograder.judge.client import WorkerClient
from autograder.protocol.arena import Arena, new_arena_fd
from autograder.protocol.data import DataCodec
from autograder.protocol.wire import ProtocolError, loads

GRADER = Path(__file__).resolve().parent.parent / "autograder"


def test_frames_never_unpickle_a_global():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(ProtocolError, match="refused to unpickle the global"):
        loads(pickle.dumps(Evil()))
    assert loads(pickle.dumps({"a": [1, 2.5, ("T", [b"x", None])]})) == {"a": [1, 2.5, ("T", [b"x", None])]}


def test_a_decoded_tensor_is_a_private_copy_of_the_arena():
    """The sender may write its arena at any time after sending: the receiver's tensor must not move."""
    fd = new_arena_fd("test")
    sender, receiver = DataCodec(Arena(fd), Arena(fd)), DataCodec(Arena(fd), Arena(fd))
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    sender.begin_send()
    tree = sender.encode({"x": x, "shape": x.shape, "dtype": x.dtype})
    receiver.begin_receive(sender.outgoing.offset)
    got = receiver.decode(tree)
    sender.begin_send()
    sender.encode(torch.full((3, 4), -1.0))  # overwrites the same arena bytes
    assert torch.equal(got["x"], x) and got["shape"] == (3, 4) and got["dtype"] is torch.float32
    os.close(fd)


@pytest.mark.parametrize(("claimed", "credited"), [(0.2, None), (0.3, None), (0.5, 0.75), (0.7, 0.75),
                                                  (0.8, 0.8), (1.0, 1.0)])
def test_a_short_claim_is_credited_at_three_quarters_of_the_bracket_and_a_far_short_one_rejected(claimed, credited):
    """100 ms of timed calls on the judge's clock: a claim of 80 ms or more is credited as claimed; one
    of 50-70 ms (a loaded host preempting the worker between repetitions, or a timer shaving its
    readings) is credited at 75 ms, what the judge's clock vouches for; one below 35 ms is rejected as
    tampered with. Exact to 1e-9 (arithmetic on the given seconds)."""
    bracket_s, overhead_s = 0.120, 0.020
    if credited is None:
        with pytest.raises(bracket.TimingRejected, match="tampered"):
            bracket.check_claim(claimed * 0.100, bracket_s, overhead_s)
    else:
        fraction, seconds = bracket.check_claim(claimed * 0.100, bracket_s, overhead_s)
        assert fraction == pytest.approx(claimed, abs=1e-9) and seconds == pytest.approx(credited * 0.100, abs=1e-9)


PACKAGE = '''
import time
def work():
    time.sleep(0.004)
    return 7
'''
HALVING_TIMER = '''
import autograder.worker.timer as timer
_samples = timer.samples
timer.samples = lambda fn, reps, flush_l2, device: [s / 2 for s in _samples(fn, reps, flush_l2, device)]
'''


@pytest.fixture
def worker_of(tmp_path, monkeypatch):
    """A judge-side client for a package written into tmp_path (as the grading plugin would hold)."""
    clients = []

    def start(init: str) -> WorkerClient:
        (tmp_path / "slowpkg").mkdir()
        (tmp_path / "slowpkg" / "__init__.py").write_text(textwrap.dedent(PACKAGE + init))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(GRADER.parent)]))
        client = WorkerClient("slowpkg")
        finder = importer.install("slowpkg", client)
        clients.append((client, finder))
        monkeypatch.setattr(this_run, "worker", client)
        client.start()
        return client

    yield start
    for client, finder in clients:
        client.kill()
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.startswith("slowpkg")]:
            del sys.modules[name]


def test_the_course_timer_times_the_worker_under_the_judges_clock(worker_of):
    from autograder.timing import measure

    worker_of("")
    import slowpkg

    timing = measure(slowpkg.work, warmup=1, reps=10)
    assert 0.004 <= timing.median_s < 0.05 and timing.output == 7


def test_a_timer_rebound_to_halve_its_readings_is_put_back_or_rejected(worker_of):
    """The worker puts its pinned timer back before every request (autograder/worker/trust.py); were
    the halved readings to reach the judge, its bracket would raise them to 3/4 of its own clock.
    Either way: nothing faster than 3/4 of the 4 ms the call takes."""
    from autograder.timing import measure

    worker_of(HALVING_TIMER)
    import slowpkg

    try:
        timing = measure(slowpkg.work, warmup=1, reps=10)
    except bracket.TimingRejected as exc:
        assert "tampered" in str(exc)
    else:
        assert timing.median_s >= 0.003, f"a 4 ms call timed at {timing.median_s * 1e3:.2f} ms"


def test_a_claim_short_of_the_bracket_is_raised_to_three_quarters_of_the_judges_clock(worker_of, monkeypatch,
                                                                                      capsys):
    """Time in the bracket that is in no sample (a loaded host preempting the worker between
    repetitions; here 40 ms the judge is told its loop did not take): the samples are raised so their
    sum is MIN_CLAIM_FRACTION of the net bracket, never less, and the report says so."""
    from autograder.timing import measure

    worker_of("")
    import slowpkg

    monkeypatch.setattr(bracket, "empty_loop_s", lambda *a, **k: -0.080)
    timing = measure(slowpkg.work, warmup=1, reps=10)  # 10 x 4 ms claimed of ~120 ms net: 0.35 or less
    credited = timing.mean_s * timing.reps
    # The net bracket is the loop (>= 40 ms) + 80 ms, less the judge's estimate of the reply's
    # overhead: up to 10 ms of that allowed for a loaded host.
    assert credited >= bracket.MIN_CLAIM_FRACTION * 0.110, f"credited {credited * 1e3:.2f} ms"
    assert timing.median_s >= 0.0055, f"a median of {timing.median_s * 1e3:.2f} ms: the samples were not raised"
    out = capsys.readouterr().out
    assert "short of 0.75 of the bracket" in out and "credited" in out, out


def test_an_always_equal_object_answers_no_assertion(worker_of):
    worker_of("class Yes:\n    def __eq__(self, other):\n        return True\n")
    import slowpkg

    yes = slowpkg.Yes()
    assert (yes == 1) is False and (yes == yes) is True and yes != 2


def test_the_judge_cannot_be_ptraced_by_its_worker():
    code = ("import ctypes, autograder.judge.plugin as p; p._no_dumps(); "
            "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")  # PR_GET_DUMPABLE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(GRADER.parent)))
    assert out.stdout.strip() == "0"


def _autograder_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autograder"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("autograder"))
    return names


def test_the_worker_side_imports_only_the_protocol_and_itself():
    for path in sorted((GRADER / "worker").glob("*.py")) + sorted((GRADER / "protocol").glob("*.py")):
        for module in _autograder_imports(path):
            assert module.startswith(("autograder.worker", "autograder.protocol")), f"{path.name} imports {module}"


ALIASES = '''
import torch
def draws(gens):
    return [float(torch.rand(1, generator=g)) for g in gens]
def add_one_to_each(ts):
    for t in ts:
        t.add_(1)
'''


def test_an_object_passed_twice_crosses_once(worker_of):
    """Aliases survive within one call (views of one storage do not: see the authoring guide)."""
    worker_of(ALIASES)
    import slowpkg

    g = torch.Generator().manual_seed(0)
    a, b = slowpkg.draws([g, g])
    expected = torch.Generator().manual_seed(0)
    assert [a, b] == [float(torch.rand(1, generator=expected)), float(torch.rand(1, generator=expected))]
    assert torch.equal(g.get_state(), expected.get_state())  # the judge's generator advanced as if drawn here
    t = torch.zeros(1)
    slowpkg.add_one_to_each([t, t])
    assert t.item() == 2.0


def test_the_ledger_marks_exactly_the_calls_the_judge_sent(worker_of):
    """One marker per top-level request that may run the submission: a method timed by `measure`
    (resolved while its request is encoded), a value that cannot cross (nothing sent) and a name that
    fails in the worker must not make the counts differ, or an honest test fails as tampered with."""
    import socket

    from autograder.protocol.rules import Ledger
    from autograder.timing import measure
    from autograder.worker.session import CALL_MARKER

    client = worker_of("class Thing:\n    def work(self):\n        return 1\n")
    client.begin_test("t::marks", [], {"forbidden_ops": ["aten::mm"]}, [])
    import slowpkg

    thing = slowpkg.Thing()
    thing.work()
    measure(thing.work, warmup=1, reps=3)
    with pytest.raises(TypeError), socket.socket() as unsendable:
        slowpkg.Thing(unsendable)
    with pytest.raises(AttributeError):
        slowpkg.no_such_name  # noqa: B018
    _, data = client.end_test()
    assert Ledger.from_json(data).ops[CALL_MARKER] == client.calls >= 4


CUDA_PACKAGE = '''
import torch
kept = []
def double_in_place(x):
    x.mul_(2)
    return x.sum().item()
def make(n):
    y = torch.arange(n, device="cuda", dtype=torch.float32)
    kept.append(y)
    return y
def scribble():
    for y in kept:
        y.fill_(-1.0)
    torch.cuda.synchronize()
'''
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA IPC needs a GPU (not graded here)")


@needs_cuda
def test_a_large_cuda_tensor_crosses_by_ipc_handle_as_a_private_copy(worker_of):
    """4 MB each way, above IPC_MIN_BYTES: exact values, in-place changes written back, and the
    worker writing its own tensor after returning it changes nothing the judge holds."""
    from autograder.protocol.cuda_ipc import IPC_MIN_BYTES

    worker_of(CUDA_PACKAGE)
    import slowpkg

    n = 1 << 20
    assert 4 * n >= IPC_MIN_BYTES
    x = torch.ones(n, device="cuda")
    assert slowpkg.double_in_place(x) == 2.0 * n and torch.equal(x, torch.full_like(x, 2.0))
    y = slowpkg.make(n)
    slowpkg.scribble()
    assert y.is_cuda and torch.equal(y, torch.arange(n, device="cuda", dtype=torch.float32))


@needs_cuda
def test_what_the_judge_shares_lies_in_a_pool_that_holds_none_of_its_own_tensors():
    """An IPC handle maps a whole allocator segment: the judge's oracle must not be in one it shares."""
    from autograder.judge.codec import JudgeCodec

    fd = new_arena_fd("test")
    codec = JudgeCodec.__new__(JudgeCodec)
    DataCodec.__init__(codec, Arena(fd), Arena(fd))
    oracle = torch.randn(1 << 20, device="cuda")
    codec.begin_send()
    tree = codec.encode(torch.randn(1 << 20, device="cuda"))
    assert tree[:2] == ("X", "cuda_tensor")
    segments = codec.cuda.pool_segments()
    assert segments and not any(start <= oracle.data_ptr() < start + size for start, size in segments)
    staged = codec.cuda._kept[0].data_ptr()
    assert any(start <= staged < start + size for start, size in segments)
    os.close(fd)


def test_one_judge_can_hold_a_worker_per_rank(tmp_path, monkeypatch):
    """The multi-rank tier's shape: each rank a worker of its own (process, socket, arenas) behind
    one judge, each reached through its own module proxy; a tensor sent to one never reaches the other."""
    from autograder.judge.proxies import ModuleProxy

    (tmp_path / "rankpkg").mkdir()
    (tmp_path / "rankpkg" / "__init__.py").write_text(
        "import os\nseen = []\ndef keep(x):\n    seen.append(x)\n    return os.getpid(), len(seen), float(x.sum())\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(GRADER.parent)]))
    ranks = [WorkerClient("rankpkg") for _ in range(2)]
    try:
        for client in ranks:
            client.start()
        modules = [ModuleProxy("rankpkg", client) for client in ranks]
        answers = [m.keep(torch.full((4,), float(r + 1))) for r, m in enumerate(modules)]
        answers.append(modules[0].keep(torch.ones(2)))
    finally:
        for client in ranks:
            client.kill()
    (pid0, n0, s0), (pid1, n1, s1), (pid0b, n0b, s0b) = answers
    assert pid0 != pid1 and pid0 == pid0b != os.getpid()
    assert (n0, s0, n1, s1, n0b, s0b) == (1, 4.0, 1, 8.0, 2, 2.0)


def test_a_forked_worker_reads_as_killed_once_its_zygote_is_gone():
    """No exit status comes once the zygote died (its children die with it, PDEATHSIG): poll() must
    not answer "still running" for ever, or the judge would wait on a worker that is gone."""
    import threading as _threading

    from autograder.judge.forkserver import ForkedProcess

    class GoneServer:
        dead = True
        changed = _threading.Condition()

        def status_of(self, pid: int) -> None:
            return None

    proc = ForkedProcess(GoneServer(), pid=12345, stdout=None)  # type: ignore[arg-type]
    assert proc.poll() == -9 and proc.wait(timeout=0.1) == -9
