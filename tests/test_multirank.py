"""The multi-rank tier: a test marked world_size(n) runs its code on n gloo ranks inside the sandbox,
each a worker of the test's judge; whatever a rank does (raise, exit, hang, fork, skip a collective,
call the library, forge a record), the test ends within its timeout, fails with a reason naming the
rank and where it waited, and leaves no process behind.

The course under test: the demo course plus `s03_ringdemo`, whose package `ring` sums a tensor over
the ranks by passing it around a ring with point-to-point calls."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confinement_probe import assert_forked_and_confined, findings, probe_body
from conftest import add_assignment
from test_adversarial import needs_docker

from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

TOML = """[assignment]
id = "s03_ringdemo"
title = "A ring all-reduce for the grader's own tests"
stage = 3
package = "ring"
editable = ["ring/*.py"]

[limits]
test_timeout_s = 30
file_timeout_s = 120
memory_mb = 6144
forbidden = ["torch.distributed.all_reduce"]

[accounting]
forbidden_ops = ["c10d::allreduce_*"]  # the library's all-reduce by any route (it is a dispatcher op)
"""

REFERENCE = '''"""Sum a tensor over the ranks by passing it around a ring (point-to-point only)."""

import torch
import torch.distributed as dist


def ring_all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Replace x on every rank with the sum of x over all ranks; returns x."""
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    total, passing = x.clone(), x.clone()
    for _ in range(world - 1):
        request = dist.isend(passing, (rank + 1) % world)
        incoming = torch.empty_like(passing)
        dist.recv(incoming, (rank - 1) % world)
        request.wait()
        passing = incoming
        total += incoming
    x.copy_(total)
    return x
    # END SOLUTION
'''

TESTS = '''import pytest
import torch

from ring import ring_all_reduce


def ring_on_rank(n):
    """On every rank: a rank-tagged tensor (rank r holds arange(n) * (r + 1)), summed by the ring."""
    import torch.distributed as dist

    x = torch.arange(n, dtype=torch.int64) * (dist.get_rank() + 1)
    ring_all_reduce(x)
    return dist.get_rank(), dist.get_world_size(), x.tolist()


@pytest.mark.world_size(2)
def test_ring_of_two(ranks):
    outs = ranks.run(ring_on_rank, 7)
    assert outs == [(r, 2, [i * 3 for i in range(7)]) for r in range(2)]


@pytest.mark.world_size(4)
def test_ring_of_four(ranks):
    outs = ranks.run(ring_on_rank, 5)
    assert outs == [(r, 4, [i * 10 for i in range(5)]) for r in range(4)]


@pytest.mark.world_size(2)
def test_ring_twice(ranks):
    first, second = ranks.run(ring_on_rank, 3), ranks.run(ring_on_rank, 4)
    assert [o[2] for o in first] == [[0, 3, 6]] * 2 and [o[2] for o in second] == [[0, 3, 6, 9]] * 2


@pytest.mark.world_size(2, backend="nccl")
def test_ring_on_two_gpus(ranks):
    outs = ranks.run(ring_on_rank, 3)
    assert [o[2] for o in outs] == [[0, 3, 6]] * 2
'''


def _with_tests(demo_course: Course, *names: str) -> Course:
    """The ring assignment with only the named tests of TESTS (all of them when none is named): a
    submission that hangs costs each of its tests the full timeout, so a case about one hang grades one."""
    header, *defs = re.split(r"\n\n\n(?=(?:@pytest\.mark\.world_size\([^)]*\)\n)?def )", TESTS)
    kept = [d for d in defs if not names or not d.lstrip().startswith("@") or re.search(rf"def ({'|'.join(names)})\(", d)]
    return add_assignment(demo_course, "s03_ringdemo", {
        "assignment.toml": TOML, "ring/__init__.py": "from ring.ops import ring_all_reduce\n\n__all__ = ['ring_all_reduce']\n",
        "ring/ops.py": REFERENCE, "tests/test_ring.py": "\n\n\n".join([header, *kept])})


@pytest.fixture
def ring_course(demo_course: Course) -> Course:
    return _with_tests(demo_course)


@pytest.fixture
def ring_of_two(demo_course: Course) -> Course:
    return _with_tests(demo_course, "test_ring_of_two")


@pytest.fixture
def ring_twice(demo_course: Course) -> Course:
    return _with_tests(demo_course, "test_ring_twice")


def _grade(course: Course, body: str | None, tmp_path: Path):
    """Grade the reference (body None) or a submission whose ring_all_reduce has this body."""
    if body is None:
        return _by_name(grade_assignment(course=course, assignment_id="s03_ringdemo", solution=True))
    sub = tmp_path / "submission"
    (sub / "ring").mkdir(parents=True)
    (sub / "ring" / "__init__.py").write_text("from ring.ops import ring_all_reduce\n")
    head = "import os\nimport sys\nimport time\n\nimport torch\nimport torch.distributed as dist\n\n\n"
    (sub / "ring" / "ops.py").write_text(head + "def ring_all_reduce(x):\n" + body)
    start = time.monotonic()
    result = grade_assignment(course=course, assignment_id="s03_ringdemo", submission=sub)
    return _by_name(result) | {"wall_s": time.monotonic() - start}


def _by_name(result) -> dict:
    return {t.test.nodeid.split("::")[1]: t for t in result.tests} | {"result": result}


def test_the_reference_passes_on_two_and_four_ranks_and_nccl_is_not_graded_without_gpus(ring_course, tmp_path):
    r = _grade(ring_course, None, tmp_path)
    assert r["test_ring_of_two"].status == "passed", r["test_ring_of_two"].reason
    assert r["test_ring_of_four"].status == "passed", r["test_ring_of_four"].reason
    assert r["test_ring_twice"].status == "passed", r["test_ring_twice"].reason
    nccl = r["test_ring_on_two_gpus"]
    assert nccl.status == "not_graded" and "needs 2 GPUs" in nccl.reason


def test_the_untouched_stub_fails_and_says_which_rank_raised(ring_course, tmp_path):
    r = _by_name(grade_assignment(course=ring_course, assignment_id="s03_ringdemo"))
    reason = r["test_ring_of_two"].reason + r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed"
    assert "rank 0: NotImplementedError" in reason and "rank 1: NotImplementedError" in reason


def test_a_rank_that_exits_early_is_named(ring_course, tmp_path):
    r = _grade(ring_course, "    if dist.get_rank() == 1:\n        os._exit(3)\n    time.sleep(60)\n    return x\n", tmp_path)
    text = r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed"
    assert "rank 1: WorkerDied" in text and "exited with status 3" in text, text


def test_batched_point_to_point_works_on_the_ranks(ring_course, tmp_path):
    """batch_isend_irecv checks its ops against torch's own isend/irecv: the watched ones must pass."""
    body = ("    rank, world = dist.get_rank(), dist.get_world_size()\n"
            "    total, passing = x.clone(), x.clone()\n"
            "    for _ in range(world - 1):\n"
            "        incoming = torch.empty_like(passing)\n"
            "        ops = [dist.P2POp(dist.isend, passing, (rank + 1) % world),\n"
            "               dist.P2POp(dist.irecv, incoming, (rank - 1) % world)]\n"
            "        for request in dist.batch_isend_irecv(ops):\n"
            "            request.wait()\n"
            "        passing = incoming\n"
            "        total += incoming\n"
            "    x.copy_(total)\n"
            "    return x\n")
    r = _grade(ring_course, body, tmp_path)
    assert r["test_ring_of_two"].status == r["test_ring_of_four"].status == "passed", r["test_ring_of_two"].output


def test_ranks_that_all_wait_in_recv_are_reported_within_the_timeout(ring_of_two, tmp_path):
    body = "    dist.recv(torch.empty_like(x), (dist.get_rank() + 1) % dist.get_world_size())\n    return x\n"
    r = _grade(ring_of_two, body, tmp_path)
    text = r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed"
    assert "rank 0:" in text and "rank 1:" in text and "recv #1 (src=" in text, text
    assert r["test_ring_of_two"].duration_s < 30  # the test's timeout


def test_a_slow_first_run_leaves_the_second_only_what_is_left_of_the_timeout(ring_twice, tmp_path):
    """One deadline per test, from its start: a second run that hangs after a slow first one is still
    reported (with where each rank waits) within the test's 30 s, not cut off by the test's timeout."""
    body = ("    ring_all_reduce.calls = getattr(ring_all_reduce, 'calls', 0) + 1\n"
            "    if ring_all_reduce.calls == 1:\n"
            "        time.sleep(12)\n"
            "        return x\n"
            "    while True:\n"
            "        time.sleep(0.1)\n")
    r = _grade(ring_twice, body, tmp_path)
    twice = r["test_ring_twice"]
    assert twice.status == "failed"
    assert "rank 0: still waiting" in twice.output and "rank 1: still waiting" in twice.output, twice.reason + twice.output
    assert twice.duration_s < 30  # the test's timeout


def test_a_rank_that_skips_a_collective_is_reported(ring_of_two, tmp_path):
    body = "    if dist.get_rank() == 0:\n        dist.barrier()\n    return x\n"
    r = _grade(ring_of_two, body, tmp_path)
    text = r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed"
    assert "rank 0:" in text and "barrier #1" in text and "rank 1: finished" in text, text


def test_a_daemon_forked_by_a_rank_does_not_outlive_its_test(ring_course, tmp_path):
    """The daemon carries a marker in its command line: after the grading no process on this host
    may show it (a rank cannot leave a pid file anywhere the judge reads: it writes only its own folder)."""
    marker = f"ranks-daemon-{time.monotonic_ns()}"
    body = ('    if dist.get_rank() == 0 and os.fork() == 0:\n'
            '        os.setsid()\n'
            '        if os.fork() == 0:\n'
            f'            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])\n'
            '        os._exit(0)\n'
            '    time.sleep(1)\n'
            '    return x * 0\n')
    r = _grade(ring_course, body, tmp_path)
    assert r["test_ring_of_two"].status == "failed"  # wrong sum
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker in _cmdline(p)]
    assert not left, f"processes started by a rank outlived the grading: {left}"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""




def test_a_rank_forked_by_the_fork_server_is_as_confined_as_a_fresh_worker(ring_of_two, tmp_path):
    """Rank workers fork from one zygote that imported torch (judge/forkserver.py). The fork must
    leave nothing a fresh interpreter would not have: no capability of the namespaces that cover
    the tests, no descriptor of the zygote's control socket, the test folders covered, and the
    zygote itself (its memory, environment, maps) closed to the rank."""
    r = _grade(ring_of_two, probe_body(), tmp_path)
    text = r["test_ring_of_two"].output + r["test_ring_of_two"].reason
    probes = findings(text)
    assert len(probes) >= 1, text
    for found in probes:
        assert_forked_and_confined(found)  # the fork server's child, not a fresh interpreter


def test_calling_the_library_all_reduce_is_forbidden_on_every_rank(ring_course, tmp_path):
    r = _grade(ring_course, "    dist.all_reduce(x)\n    return x\n", tmp_path)
    text = r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed" and "forbidden" in text, text


def test_the_library_all_reduce_by_another_route_is_caught_by_each_ranks_accounting(ring_course, tmp_path):
    r = _grade(ring_course, "    dist.group.WORLD.allreduce([x]).wait()\n    return x\n", tmp_path)
    text = r["test_ring_of_two"].output
    assert r["test_ring_of_two"].status == "failed", text
    assert "rank 0: " in text and "rank 1: " in text and "c10d::allreduce_" in text, text


def test_a_rank_that_forges_a_record_gains_nothing(ring_course, tmp_path):
    """A rank writes only beneath its own folder: the results file cannot even be opened, and no
    test of the ranks passes (were it written, a record that fails its check voids its file)."""
    body = ('    if dist.get_rank() == 1:\n'
            '        with open(".results.jsonl", "a") as f:\n'
            '            f.write(\'{"body": "{\\\\"kind\\\\": \\\\"test\\\\", \\\\"status\\\\": \\\\"passed\\\\"}", \'\n'
            '                    \'"mac": "00"}\\n\')\n'
            '    return x\n')
    r = _grade(ring_course, body, tmp_path)
    ranked = ("test_ring_of_two", "test_ring_of_four", "test_ring_twice")
    assert all(r[name].status == "failed" for name in ranked), [(n, r[n].status) for n in ranked]
    text = r["test_ring_of_two"].output
    assert "rank 1: PermissionError" in text or "tampered with" in r["test_ring_of_two"].reason, text


def test_ranks_talk_over_loopback_under_the_plain_backend_too(ring_course):
    """The `none` backend isolates the network as root with a fresh namespace, whose lo starts down."""
    result = grade_assignment(course=ring_course, assignment_id="s03_ringdemo", solution=True, sandbox="none")
    r = _by_name(result)
    assert r["test_ring_of_two"].status == r["test_ring_of_four"].status == "passed", r["test_ring_of_two"].output


@needs_docker
def test_ranks_talk_over_loopback_in_a_container_and_the_stub_still_names_its_ranks(ring_course):
    """`--network none` leaves a container its own loopback, which the ranks' gloo store and pairs use."""
    reference = _by_name(grade_assignment(course=ring_course, assignment_id="s03_ringdemo", solution=True,
                                          sandbox="docker", hardware="cpu"))
    for name in ("test_ring_of_two", "test_ring_of_four", "test_ring_twice"):
        assert reference[name].status == "passed", (name, reference[name].reason, reference[name].output[-800:])
    stub = _by_name(grade_assignment(course=ring_course, assignment_id="s03_ringdemo", sandbox="docker",
                                     hardware="cpu"))
    text = stub["test_ring_of_two"].reason + stub["test_ring_of_two"].output
    assert stub["test_ring_of_two"].status == "failed" and "rank 1: NotImplementedError" in text, text
    assert all(stub[name].status == "failed" for name in ("test_ring_of_two", "test_ring_of_four", "test_ring_twice"))
