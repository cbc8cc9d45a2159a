"""What one judge run is for, written once by the host and read once by the judge.

The host (autograder/host/runs.py, host/collect.py) writes a `RunDescription` as JSON into the
judge's own folder (covered in every worker's view) and starts pytest with two options of ours:
`--ag-run PATH` and, in a graded run, `--ag-key-fd N` (the HMAC key, never in a file or argv).
The judge's plugin (autograder/judge/plugin.py) reads it before any conftest loads.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

# A test's time limit counts its own time, not the time it waited for a CPU (judge/own_time.py); on a
# busy host it may so run past its limit on the wall clock, but never past this many times it.
MAX_STRETCH = 4.0
OPT_RUN = "--ag-run"        # the path of this run's description
OPT_KEY_FD = "--ag-key-fd"  # the fd the judge reads the HMAC key from (a graded run)
RUN_FILE = "run.json"  # beside the results, in the judge's folder


@dataclass(frozen=True)
class RunDescription:
    """One judge run: the package it grades (and the given packages beside it, never imported by
    the judge), the forbidden APIs and accounting rules of the assignment, and where it writes.
    A graded run has `results` (signed records); a collection run has `manifest` (the expected
    tests); `attachments` is where perf tests' figures go; `worker_hides` are paths the worker's
    own mount view covers."""

    package: str
    given: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    accounting: dict[str, Any] = field(default_factory=dict)
    results: str | None = None
    manifest: str | None = None
    attachments: str | None = None
    worker_hides: tuple[str, ...] = ()
    reveal_hidden: bool = False  # the reference is graded: hidden tests' messages are the course's own

    def __post_init__(self) -> None:
        if type(self.package) is not str or not self.package.isidentifier():
            raise ValueError(f"run description: package must be a Python identifier, got {self.package!r}")
        for name in ("given", "forbidden", "worker_hides"):
            value = getattr(self, name)
            if type(value) is not tuple or not all(type(v) is str and v for v in value):
                raise ValueError(f"run description: {name} must be a tuple of non-empty strings, got {value!r}")
        if type(self.accounting) is not dict:
            raise ValueError(f"run description: accounting must be a table, got {type(self.accounting).__name__}")
        for name in ("results", "manifest", "attachments"):
            if getattr(self, name) is not None and type(getattr(self, name)) is not str:
                raise ValueError(f"run description: {name} must be a path or absent")
        if type(self.reveal_hidden) is not bool:
            raise ValueError(f"run description: reveal_hidden must be true or false, got {self.reveal_hidden!r}")
        if (self.results is None) == (self.manifest is None):
            raise ValueError("run description: a run writes either results (grading) or a manifest (collection)")

    def write(self, path: Path) -> Path:
        """Write this description as JSON to `path` (in a folder the workers cannot see); the path."""
        path.write_text(json.dumps(asdict(self), sort_keys=True))
        return path

    @classmethod
    def read(cls, path: str | Path) -> RunDescription:
        """The description at `path`; ValueError naming what is wrong with it."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"run description {path}: unreadable ({exc})") from None
        known = {f.name for f in fields(cls)}
        if type(data) is not dict:
            raise ValueError(f"run description {path}: not a JSON object")
        if not set(data) <= known:
            raise ValueError(f"run description {path}: unknown keys {sorted(set(data) - known)}")
        lists = {k: tuple(v) for k, v in data.items() if k in ("given", "forbidden", "worker_hides") and type(v) is list}
        return cls(**(data | lists))
