"""The supervisor against a cluster the judge simulates with its own clock (checks.Cluster): four
nodes train, beating as each step starts; the checkpoint folder holds valid checkpoints of steps 4
and 8 and a torn one of step 12 (written by the judge). Then one node dies (exits 137) or hangs
(no exit, no beat: gloo can block forever, so nobody else reports anything either). The supervisor
must kill every member still running, launch a new generation on the other three with ranks by
node id, resume after step 8, and the judge's step log must then hold every step exactly once."""

from __future__ import annotations

import pytest
from checks import Cluster


@pytest.mark.points(4)
def test_a_node_that_dies_restarts_the_survivors_from_the_last_valid_checkpoint(tmp_path):
    cluster = Cluster(tmp_path, nodes=[0, 1, 2, 3], timeout=5.0)
    cluster.run_until(fault=("die", 2, 13))
    cluster.check_restart(failed=2, detected_by=None)


@pytest.mark.points(6)
def test_a_node_that_hangs_is_found_by_the_clock_not_by_an_error(tmp_path):
    cluster = Cluster(tmp_path, nodes=[0, 1, 2, 3], timeout=5.0)
    cluster.run_until(fault=("hang", 1, 13))
    cluster.check_restart(failed=1, detected_by=5.0)


@pytest.mark.points(2)
def test_too_few_survivors_stop_the_job(tmp_path):
    cluster = Cluster(tmp_path, nodes=[4, 7], timeout=5.0, min_nodes=2)
    cluster.run_until(fault=("die", 7, 10))
    stops = [a for a in cluster.actions if a[0] == "stop"]
    assert stops and not cluster.launches[1:], (f"one of 2 nodes left with min_nodes=2: expected a Stop and no new "
                                               f"Launch, got {cluster.actions}")
    assert cluster.killed == [(4,)] or cluster.killed == [(4, 7)], f"the survivor must be killed: kills {cluster.killed}"
