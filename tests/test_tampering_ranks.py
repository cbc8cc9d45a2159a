"""Multi-rank side channels: ranks that hand each other their whole inputs outside the collectives
(through files, or through the process group's rendezvous store) while decoy messages of the right
sizes satisfy a message spy.

The course under test: the ring demo of test_multirank.py with one test file, whose inputs the
judge draws per rank and sends to that rank only (ranks.run_each), and whose message test checks
what each message carried, not only how many there were and their sizes. Three gradings: the
reference, and the two attacks of tests/fixtures/tampering/ranks_*."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, MANIFEST_CACHE, add_assignment
from test_multirank import REFERENCE, TOML

from autograder.host.course_files import ignore
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

ATTACKS = Path(__file__).parent / "fixtures" / "tampering"

SECRET_TESTS = '''import secrets

import pytest
import torch

from ring import ring_all_reduce


def ring_with_payloads(x):
    """On every rank: its input summed by the ring, and a copy of every message it sent."""
    import torch.distributed as dist

    sent, originals = [], (dist.isend, dist.send)

    def spy(original):
        def recorded(tensor, *args, **kwargs):
            sent.append(tensor.detach().clone())
            return original(tensor, *args, **kwargs)
        return recorded

    dist.isend, dist.send = spy(dist.isend), spy(dist.send)
    x = x.clone()  # in place on a copy: the judge's draw must stay what it drew
    try:
        ring_all_reduce(x)
    finally:
        dist.isend, dist.send = originals
    return x, sent


def draws(world, n):
    """One input per rank from a seed no rank sees: a rank learns another's only from a message."""
    g = torch.Generator().manual_seed(secrets.randbits(62))
    return [torch.randint(0, 2**40, (n,), generator=g) for _ in range(world)]


@pytest.mark.world_size(2)
def test_the_sum_of_inputs_only_each_rank_knows(ranks):
    xs = draws(2, 64)
    for rank, (x, _) in enumerate(ranks.run_each(ring_with_payloads, xs)):
        assert torch.equal(x, xs[0] + xs[1]), f"rank {rank}: not the sum of the two ranks' inputs"


@pytest.mark.world_size(2)
def test_the_message_carries_the_senders_input(ranks):
    xs = draws(2, 64)
    for rank, (_, sent) in enumerate(ranks.run_each(ring_with_payloads, xs)):
        assert [m.numel() for m in sent] == [64], f"rank {rank}: sent {len(sent)} messages, expected one of 64"
        assert torch.equal(sent[0], xs[rank]), f"rank {rank}: its message is not its input (a decoy of the right size)"
'''


@pytest.fixture(scope="module")
def secret_course(tmp_path_factory: pytest.TempPathFactory) -> Course:
    root = tmp_path_factory.mktemp("ranks") / "course"
    shutil.copytree(FIXTURES / "demo_course", root, ignore=ignore())
    return add_assignment(Course(root, cache=MANIFEST_CACHE), "s03_ringdemo", {
        "assignment.toml": TOML, "ring/__init__.py": "from ring.ops import ring_all_reduce\n",
        "ring/ops.py": REFERENCE, "tests/test_ring_secret.py": SECRET_TESTS})


def _grade(course: Course, attack: str | None) -> dict:
    result = grade_assignment(course=course, assignment_id="s03_ringdemo", solution=attack is None,
                              submission=None if attack is None else ATTACKS / attack)
    return {t.test.nodeid.split("::")[1]: t for t in result.tests} | {"score": result.score}


def test_the_reference_passes_the_tests_on_inputs_each_rank_alone_knows(secret_course):
    r = _grade(secret_course, None)
    for name in ("test_the_sum_of_inputs_only_each_rank_knows", "test_the_message_carries_the_senders_input"):
        assert r[name].status == "passed", (name, r[name].reason, r[name].output[-1500:])


def test_ranks_cannot_hand_inputs_over_through_any_file(secret_course):
    """Work dir, /tmp, /dev/shm, the other rank's TMPDIR and HOME, the group's folder: each rank may
    write only beneath its own folder and read nothing in the group's folder but its own (Landlock),
    so no input arrives, the sum is wrong and the decoy fails the message test: nothing earned."""
    r = _grade(secret_course, "ranks_files")
    assert r["test_the_sum_of_inputs_only_each_rank_knows"].status == "failed", "an input crossed through a file"
    assert r["test_the_message_carries_the_senders_input"].status == "failed"
    assert r["score"] == 0


def test_inputs_passed_through_the_store_beside_decoy_messages_fail_the_message_test(secret_course):
    """The store stays reachable (new_group needs it): the sum is right, but the messages are
    checked for what they carried, so the decoys earn nothing there."""
    r = _grade(secret_course, "ranks_store")
    assert r["test_the_sum_of_inputs_only_each_rank_knows"].status == "passed"  # the store is the rank's to use
    messages = r["test_the_message_carries_the_senders_input"]
    assert messages.status == "failed" and "decoy" in messages.reason + messages.output, messages.reason


def test_a_confined_rank_reaches_only_its_own_folder_and_the_store(tmp_path: Path):
    """confine() itself, in a forked process (no grading): what a rank may and may not touch."""
    import json
    import os

    from autograder.worker.confine import confine, landlock_abi

    if landlock_abi() < 1:
        pytest.skip("the kernel offers no Landlock: ranks are not confined here (their progress line says so)")
    group = Path(tempfile.mkdtemp(prefix="ranks-", dir="/tmp"))
    try:
        for r in (0, 1):
            (group / f"rank{r}" / "tmp").mkdir(parents=True)
        (group / "rank0" / "tmp" / "input").write_text("rank 0's input")
        (group / "store").write_text("")
        read_end, write_end = os.pipe()
        if (pid := os.fork()) == 0:
            os.close(read_end)
            confine(group_folder=str(group), own_folder=str(group / "rank1"), store_file=str(group / "store"), nccl=False)
            tries = {"read rank 0's file": lambda: (group / "rank0" / "tmp" / "input").read_text(),
                     "list the group's folder": lambda: os.listdir(group),
                     "write /tmp": lambda: Path("/tmp", f"leak-{os.getpid()}").write_text("x"),
                     "write the test's folder": lambda: (tmp_path / "leak").write_text("x"),
                     "write /dev/shm": lambda: Path("/dev/shm", f"leak-{os.getpid()}").write_text("x"),
                     "write its own TMPDIR": lambda: (group / "rank1" / "tmp" / "own").write_text("x"),
                     "open the store": lambda: open(group / "store", "r+").close(),
                     "read the grader": lambda: Path(__file__).read_text()}
            done = {}
            for what, act in tries.items():
                try:
                    act()
                    done[what] = True
                except OSError:
                    done[what] = False
            os.write(write_end, json.dumps(done).encode())
            os._exit(0)
        os.close(write_end)
        os.waitpid(pid, 0)
        with os.fdopen(read_end) as f:
            done = json.loads(f.read())
        allowed = {"write its own TMPDIR", "open the store", "read the grader"}
        assert {what for what, ok in done.items() if ok} == allowed, done
    finally:
        shutil.rmtree(group, ignore_errors=True)
