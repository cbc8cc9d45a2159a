"""Grading in containers end to end (`--sandbox docker`, the CPU image of containers/cpu/, which
.ci/run builds): a real assignment's reference earns every point and its stub none, and a hostile
submission finds no network, no root and no room to fork without bound, and leaves no container.
Timeouts and crashes in containers: test_adversarial.py and test_adversarial_hardening.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import autograder.host.grade as grade_module
from autograder.host.grade import grade_assignment
from autograder.host.repo import Course, find_root
from autograder.sandbox.docker import DockerBackend
from test_adversarial import _assert_add_tests_earn_nothing, _grade, _live_processes_mentioning, _submission, needs_docker

pytestmark = needs_docker
ASSIGNMENT = "s05_kvcache"  # ~90 CPU tests of plain torch: a whole assignment in under a minute


def containers_left(roots: list[Path]) -> list[str]:
    """Names of the grader's containers still there whose mounts lie under `roots` (other tests'
    containers, running beside this one on another process, are not this test's business)."""
    client = DockerBackend(gpu=False).client()
    return [c.name for c in client.containers.list(all=True, filters={"label": "autograder=run"})
            if any(Path(m.get("Source", "/")).is_relative_to(r) for m in c.attrs.get("Mounts", []) for r in roots)]


@pytest.mark.parametrize("solution", [True, False], ids=["reference", "stub"])
def test_a_real_assignment_grades_in_containers_reference_full_and_stub_zero(solution, monkeypatch):
    roots: list[Path] = []
    new_root = grade_module.new_root
    monkeypatch.setattr(grade_module, "new_root", lambda: roots.append(new_root()) or roots[-1])
    result = grade_assignment(course=Course(find_root()), assignment_id=ASSIGNMENT, solution=solution,
                              sandbox="docker", hardware="cpu")
    graded = [t for t in result.tests if t.status in ("passed", "failed", "error")]  # not written answers
    assert len(graded) > 50
    if solution:
        assert all(t.status == "passed" for t in graded), [(t.test.nodeid, t.reason) for t in graded
                                                            if t.status != "passed"][:3]
    else:
        assert result.score == 0 and not any(t.status == "passed" and t.score for t in graded)
    assert roots and not containers_left(roots)


def test_a_submission_in_a_container_has_no_network_and_no_root(demo_course, tmp_path):
    """add() reports what it sees in its failure message: the network interfaces and its uid."""
    sub = _submission(tmp_path, demo_course, """
        import os, socket
        def add(a, b):
            try:
                socket.create_connection(("1.1.1.1", 53), timeout=3).close()
                reached = "reached"
            except OSError as e:
                reached = type(e).__name__
            names = sorted(name for _, name in socket.if_nameindex())
            raise AssertionError(f"interfaces={names} uid={os.getuid()} outside={reached}")
    """)
    result, by_name = _grade(demo_course, sub, "docker")
    _assert_add_tests_earn_nothing(by_name)
    text = by_name["test_add_small_integers"].reason + by_name["test_add_small_integers"].output
    assert "interfaces=['lo']" in text, text
    assert "outside=reached" not in text and "outside=" in text, text
    uid = int(text.split("uid=")[1].split()[0])
    assert uid != 0, text
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "passed"


def test_a_fork_bomb_in_a_container_is_contained_and_leaves_nothing(demo_course, tmp_path):
    sub = _submission(tmp_path, demo_course, """
        import os
        def add(a, b):
            while True:
                os.fork()
    """)
    roots: list[Path] = []
    result, by_name = _grade(demo_course, sub, "docker", roots)
    _assert_add_tests_earn_nothing(by_name)
    # ran (and passed) after the bomb; held, as the tamper scan flags the package's os.fork
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "held"
    assert roots and not any(_live_processes_mentioning(str(root)) for root in roots)
    assert not containers_left(roots)


def test_filling_memory_past_the_containers_limit_fails_only_that_test(demo_course, tmp_path):
    """8 GiB written (not just reserved) against the demo's 6 GiB: the launcher's RLIMIT_AS makes it a
    MemoryError in that test (the cgroup limit alone stalled the whole file until its wall limit)."""
    sub = _submission(tmp_path, demo_course, """
        def add(a, b):
            hog = b"x" * (8 << 30)
            return a + b + len(hog) * 0
    """)
    roots: list[Path] = []
    result, by_name = _grade(demo_course, sub, "docker", roots)
    _assert_add_tests_earn_nothing(by_name)
    assert "MemoryError" in by_name["test_add_small_integers"].output
    assert by_name["test_mean_matches_fsum"].status == "passed"
    assert by_name["test_mean_of_empty_list_raises_value_error"].status == "passed"
    assert roots and not containers_left(roots)
