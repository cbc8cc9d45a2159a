"""Multi-rank side channels on a real assignment: s02's reference with the pipeline's activations and
gradients, and the tensor-parallel layers' all-reduce sums, moved through the process group's
rendezvous store, while every message the tests count carries zeros of the right size
(tests/fixtures/tampering/s02_side_channel). Its values and counts are right (the store is the
rank's to use), so only the check of what each message carried stops it: each rank gets only its
own shard or stage, from a seed no rank sees, and the judge checks every payload against its own
computation. One grading, of the two public files with multi-rank tests (2 ranks each)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES, REPO

from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

ATTACK = FIXTURES / "tampering" / "s02_side_channel"
FILES = ["tests/test_pipeline_run.py", "tests/test_tensor_parallel.py"]
SIDESTEPPED = ("test_1f1b_and_afab_gradients_equal_one_process_on_two_stages",
               "test_tensor_parallel_layers_equal_one_process_on_two_ranks")


def test_activations_through_the_store_beside_decoy_messages_earn_nothing(repo_course: Course, tmp_path: Path):
    sub = tmp_path / "submission"
    shutil.copytree(REPO / "solutions" / "s02_parallel" / "parallel", sub / "parallel")
    for attacked in (ATTACK / "parallel").glob("*.py"):
        shutil.copy(attacked, sub / "parallel" / attacked.name)
    result = grade_assignment(course=repo_course, assignment_id="s02_parallel", submission=sub, only_files=FILES)
    tests = {t.test.nodeid.split("::")[1]: t for t in result.tests}
    for name in SIDESTEPPED:
        t = tests[name]
        assert t.status == "failed", (name, t.status, t.reason, t.output[-1500:])
        assert "not other data of the right size" in t.reason, (name, t.reason)
    # the rest of the package is the reference's: the one single-process test still passes
    assert tests["test_shard_range_splits_like_tensor_split"].status == "passed"
    assert result.score == tests["test_shard_range_splits_like_tensor_split"].score == 2
