"""The MIG packer against a brute-force optimum computed by the tests (conftest.py): every
assignment of requests to GPUs (or to none), each GPU's share checked for a valid layout with the
tests' own table."""

from __future__ import annotations

import pytest
from clustersim import pack_mig
from conftest import check_packing, packed

CASES = [
    (["3g.71gb", "4g.71gb", "1g.18gb", "1g.18gb"], 2),  # 4g+3g fill a GPU; the 1g pair takes another
    (["4g.71gb", "4g.71gb", "3g.71gb", "1g.35gb"], 2),  # two 4g need two GPUs; 3g and 1g.35gb after them
    (["2g.35gb"] * 3 + ["1g.18gb"] * 2, 1),  # three 2g (0-5) leave one 1g start (6): one 1g left out
    (["1g.18gb+me", "1g.18gb+me", "7g.141gb", "1g.35gb"], 2),
    (["3g.71gb", "3g.71gb", "3g.71gb", "2g.35gb", "1g.18gb"], 2),
]


@pytest.mark.points(2)
@pytest.mark.parametrize("requests,num_gpus", CASES)
def test_packer_matches_brute_force(requests, num_gpus):
    check_packing(requests, num_gpus)


@pytest.mark.points(1)
def test_packer_by_hand_and_errors():
    placements, unplaced, used = packed(["2g.35gb"] * 3 + ["1g.18gb"] * 2, 1)
    assert len(placements) == 4 and len(unplaced) == 1 and used == 1
    placements, unplaced, used = packed(["1g.18gb"], 3)
    assert used == 1 and unplaced == []
    assert packed(["1g.18gb"], 0) == [[], [0], 0]
    with pytest.raises(ValueError):
        pack_mig(["8g.160gb"], 1)
