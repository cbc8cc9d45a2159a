"""MIG (Multi-Instance GPU) partitions of an H200: the profiles, their placement rules, valid layouts.

The profiles come from `data/h200_mig_profiles.txt`: the output of `nvidia-smi mig -lgip` (GPU
instance profiles: name, id, instances free/total, memory, SMs) and `nvidia-smi mig -lgipp`
(placements: the allowed start memory slices and the number of slices an instance occupies) on an
NVIDIA H200 with MIG mode disabled, driver 580.159.04, captured 2026-12-02.

A GPU has 8 memory slices (0..7) and 7 compute slices. An instance of a profile occupies the
memory slices [start, start + size); a *layout* is a list of (profile name, start) pairs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_FILE = Path(__file__).parent / "data" / "h200_mig_profiles.txt"
NUM_MEMORY_SLICES = 8
NUM_COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile, as `nvidia-smi mig -lgip` / `-lgipp` print it.

    name: "3g.71gb" (compute slices "g", then memory); profile_id: the ID column;
    max_instances: the Total of the Instances column (Free/Total with MIG off: all free);
    memory_gib: the Memory column; sm_count: the SM column;
    starts: the allowed start memory slices, ascending; size: memory slices an instance occupies.
    """

    name: str
    profile_id: int
    max_instances: int
    memory_gib: float
    sm_count: int
    starts: tuple[int, ...]
    size: int

    @property
    def compute_slices(self) -> int:
        """The "g" count of the name: 1 for "1g.18gb+me", 7 for "7g.141gb"."""
        return int(self.name.split("g.", 1)[0])


def parse_mig_profiles(text: str) -> dict[str, MigProfile]:
    """Parse `nvidia-smi mig -lgip` and `-lgipp` output (both in `text`) into name -> MigProfile.

    A -lgip row looks like `|   0  MIG 3g.71gb   9   2/2   69.75   No   60   3   0   |` (GPU, name,
    ID, instances free/total, memory GiB, P2P, SM, DEC, ENC; the line below it holds CE, JPEG, OFA).
    A -lgipp line looks like `GPU  0 Profile ID  9 Placements: {0,4}:4`; with a single start it
    reads `Placement : {0}:8`. Profiles are joined by ID. Raises ValueError when a profile has no
    placement line, a placement line names an unknown ID, or no profile is found at all.
    """
    # BEGIN SOLUTION
    rows = re.findall(r"MIG\s+(\S+)\s+(\d+)\s+\d+/(\d+)\s+([\d.]+)\s+\S+\s+(\d+)", text)
    placements = {}
    for pid, starts, size in re.findall(r"Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}:(\d+)", text):
        placements[int(pid)] = (tuple(sorted(int(s) for s in starts.split(",") if s.strip())), int(size))
    if not rows:
        raise ValueError("no MIG profile rows (nvidia-smi mig -lgip) found")
    profiles = {}
    for name, pid, total, memory, sms in rows:
        if int(pid) not in placements:
            raise ValueError(f"profile {name} (ID {pid}) has no placement line (nvidia-smi mig -lgipp)")
        starts, size = placements.pop(int(pid))
        profiles[name] = MigProfile(name, int(pid), int(total), float(memory), int(sms), starts, size)
    if placements:
        raise ValueError(f"placements for unknown profile IDs {sorted(placements)}")
    return profiles
    # END SOLUTION


@cache
def _h200_profiles() -> tuple[MigProfile, ...]:
    return tuple(parse_mig_profiles(DATA_FILE.read_text()).values())


def h200_profiles() -> dict[str, MigProfile]:
    """The H200's profiles, parsed from DATA_FILE (a fresh dict each call)."""
    return {p.name: p for p in _h200_profiles()}


def validate_layout(layout: Iterable[tuple[str, int]], profiles: dict[str, MigProfile] | None = None) -> None:
    """Raise ValueError (saying why) unless `layout` is a valid partition of one GPU:

    every profile is known; every start is one of its profile's allowed starts; no two instances
    share a memory slice (instance i occupies [start, start + size)); no instance reaches past
    slice 7; no profile has more than max_instances instances; the compute slices ("g") sum to at
    most 7. The empty layout is valid. `profiles` defaults to the H200's.
    """
    profiles = h200_profiles() if profiles is None else profiles
    # BEGIN SOLUTION
    used = [False] * NUM_MEMORY_SLICES
    counts: Counter[str] = Counter()
    compute = 0
    for name, start in layout:
        if name not in profiles:
            raise ValueError(f"unknown MIG profile {name!r}")
        p = profiles[name]
        if start not in p.starts:
            raise ValueError(f"{name} cannot start at memory slice {start} (allowed: {list(p.starts)})")
        if start + p.size > NUM_MEMORY_SLICES:
            raise ValueError(f"{name} at {start} reaches past memory slice {NUM_MEMORY_SLICES - 1}")
        for s in range(start, start + p.size):
            if used[s]:
                raise ValueError(f"{name} at {start} overlaps another instance on memory slice {s}")
            used[s] = True
        counts[name] += 1
        if counts[name] > p.max_instances:
            raise ValueError(f"more than {p.max_instances} instances of {name}")
        compute += p.compute_slices
    if compute > NUM_COMPUTE_SLICES:
        raise ValueError(f"{compute} compute slices > {NUM_COMPUTE_SLICES}")
    # END SOLUTION


def is_valid_layout(layout: Iterable[tuple[str, int]], profiles: dict[str, MigProfile] | None = None) -> bool:
    """validate_layout as a predicate."""
    try:
        validate_layout(layout, profiles)
    except ValueError:
        return False
    return True


class MigGpu:
    """One GPU in MIG mode: its instances, start slice -> (profile name, owner)."""

    def __init__(self, profiles: dict[str, MigProfile] | None = None) -> None:
        self.profiles = h200_profiles() if profiles is None else profiles
        self.instances: dict[int, tuple[str, object]] = {}

    def layout(self) -> list[tuple[str, int]]:
        """The current layout, by start slice."""
        return [(name, start) for start, (name, _) in sorted(self.instances.items())]

    def free_starts(self, profile: str) -> list[int]:
        """The starts (ascending) at which one more instance of `profile` keeps the layout valid;
        [] when there is none. ValueError for an unknown profile."""
        # BEGIN SOLUTION
        if profile not in self.profiles:
            raise ValueError(f"unknown MIG profile {profile!r}")
        current = self.layout()
        return [s for s in self.profiles[profile].starts if is_valid_layout([*current, (profile, s)], self.profiles)]
        # END SOLUTION

    def allocate(self, profile: str, owner: object = None) -> int:
        """Create an instance of `profile` at its lowest free start and return that start.
        ValueError when the profile is unknown or no valid start is left (nothing changes then)."""
        # BEGIN SOLUTION
        starts = self.free_starts(profile)
        if not starts:
            raise ValueError(f"no valid start left for {profile} in layout {self.layout()}")
        self.instances[starts[0]] = (profile, owner)
        return starts[0]
        # END SOLUTION

    def place(self, profile: str, start: int, owner: object = None) -> None:
        """Create an instance of `profile` at `start`; ValueError if the layout would be invalid."""
        validate_layout([*self.layout(), (profile, start)], self.profiles)
        self.instances[start] = (profile, owner)

    def release(self, start: int) -> None:
        """Destroy the instance at `start` (KeyError if there is none)."""
        del self.instances[start]

    def copy(self) -> MigGpu:
        other = MigGpu(self.profiles)
        other.instances = dict(self.instances)
        return other
