"""MIG on an H200: parsing nvidia-smi's profile tables, the layout validator against an
independent enumeration, and allocation at the lowest valid start."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from clustersim import MigGpu, is_valid_layout, parse_mig_profiles, validate_layout
from conftest import H200, all_valid_layouts, oracle_valid

from autograder.testing import in_worker


@in_worker
def validate_many(layouts: list) -> list[bool]:
    return [is_valid_layout(layout) for layout in layouts]


@in_worker
def parsed_table(text: str) -> dict:
    return {name: [p.profile_id, p.max_instances, list(p.starts), p.size, p.compute_slices, p.memory_gib, p.sm_count]
            for name, p in parse_mig_profiles(text).items()}


@pytest.mark.points(3)
def test_parse_the_h200_tables(request):
    # the nvidia-smi output shipped with the package (the course's copy, not the submission's); in a
    # quick loop pytest may take the repository as its root, so then the assignment folder
    root = request.config.rootpath
    root = root if (root / "clustersim").is_dir() else Path(__file__).resolve().parents[1]
    got = parsed_table((root / "clustersim" / "data" / "h200_mig_profiles.txt").read_text())
    assert set(got) == set(H200)
    for name, (pid, cap, starts, size, g) in H200.items():
        assert got[name][:5] == [pid, cap, list(starts), size, g], name
    # memory and SMs from the -lgip columns
    assert got["3g.71gb"][5:] == [69.75, 60] and got["7g.141gb"][5:] == [140.0, 132]
    assert got["1g.35gb"][5:] == [32.5, 26]


@pytest.mark.points(1)
def test_parse_reads_single_placement_lines_and_refuses_a_missing_one():
    text = """|   0  MIG 4g.71gb          5     1/1        69.75      No     64     4     0   |
|                                                               4     4     0   |
|   0  MIG 2g.35gb         14     3/3        32.50      No     32     2     0   |
GPU  0 Profile ID  5 Placement : {0}:4
GPU  0 Profile ID 14 Placements: {0,2,4}:2
"""
    got = parsed_table(text)
    assert got["4g.71gb"][:4] == [5, 1, [0], 4] and got["2g.35gb"][:4] == [14, 3, [0, 2, 4], 2]
    with pytest.raises(ValueError):
        parse_mig_profiles(text.replace("GPU  0 Profile ID 14 Placements: {0,2,4}:2\n", ""))


@pytest.mark.points(2)
def test_hand_layouts():
    # 4g at 0 (slices 0-3) + 3g at 4 (slices 4-7): 7 compute slices, all memory: valid
    assert is_valid_layout([("4g.71gb", 0), ("3g.71gb", 4)])
    # three 2g (0-1, 2-3, 4-5) and a 1g.35gb at 6 (6-7): valid
    assert is_valid_layout([("2g.35gb", 0), ("2g.35gb", 2), ("2g.35gb", 4), ("1g.35gb", 6)])
    assert is_valid_layout([("7g.141gb", 0)]) and is_valid_layout([])
    assert is_valid_layout([("1g.18gb", s) for s in range(7)])
    bad = [
        [("2g.35gb", 1)],  # 2g starts only at 0, 2, 4
        [("1g.18gb", 7)],  # no 1g instance at slice 7
        [("3g.71gb", 2)],  # 3g only at 0 or 4
        [("4g.71gb", 4)],  # 4g only at 0
        [("2g.35gb", 0), ("1g.18gb", 1)],  # slice 1 twice
        [("3g.71gb", 4), ("1g.35gb", 6)],  # slices 6-7 twice
        [("1g.18gb+me", 0), ("1g.18gb+me", 1)],  # at most one +me instance
        [("7g.141gb", 0), ("1g.18gb", 0)],
        [("5g.90gb", 0)],  # no such profile
    ]
    for layout in bad:
        with pytest.raises(ValueError):
            validate_layout(layout)


@pytest.mark.points(3)
def test_validator_agrees_with_an_enumeration_of_every_valid_layout():
    valid = all_valid_layouts()
    assert len(valid) > 1000
    layouts = [list(v) for v in sorted(valid)]
    assert all(validate_many(layouts)), "a layout the placement table allows was refused"
    rng = random.Random(13)
    names = sorted(H200)
    candidates = []
    for _ in range(1500):
        k = rng.randint(1, 4)
        candidates.append([(rng.choice(names), rng.randrange(8)) for _ in range(k)])
    verdicts = validate_many(candidates)
    for layout, verdict in zip(candidates, verdicts):
        assert verdict == (tuple(sorted(layout)) in valid) == oracle_valid(layout), layout


@pytest.mark.points(2)
def test_allocate_takes_the_lowest_valid_start():
    gpu = MigGpu()
    assert gpu.allocate("1g.18gb") == 0
    assert gpu.free_starts("3g.71gb") == [4]
    assert gpu.allocate("3g.71gb") == 4
    assert gpu.allocate("2g.35gb") == 2  # 0-1 holds the 1g at 0; 2-3 is free
    assert gpu.free_starts("1g.18gb") == [1]
    assert gpu.allocate("1g.18gb") == 1
    assert gpu.free_starts("1g.18gb") == [] and gpu.free_starts("4g.71gb") == []
    with pytest.raises(ValueError):
        gpu.allocate("1g.35gb")
    assert sorted(gpu.layout()) == [("1g.18gb", 0), ("1g.18gb", 1), ("2g.35gb", 2), ("3g.71gb", 4)]
    gpu.release(4)
    assert gpu.allocate("1g.35gb") == 4
