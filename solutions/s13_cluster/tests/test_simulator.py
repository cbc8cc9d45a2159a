"""The simulator's figures on timelines worked by hand, and its input validation."""

from __future__ import annotations

import pytest
from clustersim import ClusterSpec, Job, NodeSpec
from conftest import job, nodes_of, run_sim, sim, starts_ends


@pytest.mark.points(2)
def test_utilisation_is_over_the_horizon_from_the_first_arrival(tol):
    # One node of 4. J0 t=10 1x2 for 10 (10-20); J1 t=12 1x4 for 4 waits for J0: 20-24.
    # horizon 10..24 = 14 s; busy 2*10 + 4*4 = 36 GPU-s; util 36 / (4 * 14); waits 0 and 8.
    records, summary, _ = sim(nodes_of(4), [job(0, 10, 10, 1, 2), job(1, 12, 4, 1, 4)], "fifo")
    assert starts_ends(records) == {0: (10, 20), 1: (20, 24)}
    assert summary["makespan"] == pytest.approx(14, **tol("utilisation, wait"))
    assert summary["utilisation"] == pytest.approx(36 / 56, **tol("utilisation, wait"))
    assert summary["mean_wait"] == pytest.approx(4, **tol("utilisation, wait"))
    assert summary["max_wait"] == pytest.approx(8, **tol("utilisation, wait"))


@pytest.mark.points(2)
def test_mig_jobs_count_their_compute_share(tol):
    # One GPU. J0: two 3g.71gb instances (starts 0 and 4) for 7 s; J1 a 1g.18gb arriving at 1: no
    # valid start left (slices 0-7 all used) until 7. Busy: 2 * 3/7 * 7 + 1/7 * 2 = 6 + 2/7.
    trace = [{"job_id": 0, "arrival": 0, "duration": 7, "pods": 2, "mig_profile": "3g.71gb"},
             {"job_id": 1, "arrival": 1, "duration": 2, "mig_profile": "1g.18gb"}]
    records, summary, segments = sim(nodes_of(1), trace, "fifo")
    assert starts_ends(records) == {0: (0, 7), 1: (7, 9)}
    assert min(s[3] for s in segments if s[0] == 0) == [[["a", 0, "3g.71gb", 0]], [["a", 0, "3g.71gb", 4]]]
    assert summary["utilisation"] == pytest.approx((6 + 2 / 7) / 9, **tol("utilisation, wait"))


def refused(out: dict) -> bool:
    return out["error"] is not None and "ValueError" in out["error"]


def outcome(out: dict) -> str:
    """What simulate did instead, in words: the first line of its error, or that it returned."""
    return "simulate returned" if out["error"] is None else f"simulate raised {out['error'].partition(chr(10))[0]}"


@pytest.mark.points(1)
def test_a_job_that_can_never_fit_is_refused():
    # 1x5 inside one node of a cluster of 4-GPU nodes: never placeable
    out = run_sim(nodes_of(4, 4), [job(0, 0, 1, 1, 5, tp_scope="node")], "fifo")
    assert refused(out), f"a 1x5 job with tp_scope 'node' on nodes of 4 GPUs never fits: expected ValueError, {outcome(out)}"
    out = run_sim(nodes_of(4, 4), [job(0, 0, 1), job(0, 1, 1)], "fifo")
    assert refused(out), f"two jobs with job_id 0: expected ValueError, {outcome(out)}"
    # scope "any" spans the nodes: it runs
    records, _, _ = sim(nodes_of(4, 4), [job(0, 0, 1, 1, 5, tp_scope="any")], "fifo")
    assert starts_ends(records) == {0: (0, 1)}


@pytest.mark.points(1)
def test_configs_are_validated():
    # the valid neighbours of each refused config are built (a constructor that always raises earns nothing)
    assert Job(job_id=1, arrival=0, duration=1).duration == 1 and NodeSpec("a", 4, islands=((0, 1), (2, 3))).num_gpus == 4
    assert len(ClusterSpec((NodeSpec("a", 4), NodeSpec("b", 4))).nodes) == 2
    for bad in [{"duration": 0}, {"arrival": -1}, {"pods": 0}, {"gpus_per_pod": 0}, {"tp_scope": "rack"},
                {"mig_profile": "5g.90gb"}, {"mig_profile": "3g.71gb", "gpus_per_pod": 2}]:
        with pytest.raises(ValueError):
            Job(**({"job_id": 1, "arrival": 0, "duration": 1} | bad))
    with pytest.raises(ValueError):
        NodeSpec("a", 4, islands=((0, 1), (1, 2, 3)))
    with pytest.raises(ValueError):
        NodeSpec("a", 0)
    with pytest.raises(ValueError):
        ClusterSpec((NodeSpec("a", 4), NodeSpec("a", 4)))
