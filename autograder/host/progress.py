"""Progress of a grading, test by test: the tests reported so far out of those expected.

A batch runs several test files in one sandboxed pytest; its results file grows by a record per
test. While it runs, a watcher thread re-reads the file every half second and reports each test
the first time it appears, so a bar moves with every test instead of once per batch. Records are
read with the grading's key, but nothing here grades: a forged or partial line only fails to
advance the bar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autograder.host.collect import read_reported

# progress(label, done, total): `label` names what just finished (a test id, or a file).
Progress = Callable[[str, int, int], None]
POLL_S = 0.5


class Tally:
    """Tests done out of `total`, each counted once however many runs report it (a file rerun
    alone after its batch was cut short counts its tests again only if they were not seen)."""

    def __init__(self, total: int, progress: Progress) -> None:
        self.total = total
        self._progress = progress
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def saw(self, nodeids: Iterable[str], label: str) -> None:
        with self._lock:
            new = set(nodeids) - self._seen
            if not new:
                return
            self._seen |= new
            done = min(len(self._seen), self.total)
        self._progress(label, done, self.total)

    @contextmanager
    def watching(self, results_file: Path, key: bytes, expected: set[str]) -> Iterator[None]:
        """While the body runs, report the tests of `expected` that `results_file` records."""
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(POLL_S):
                reported = [n for n in read_reported(results_file, key).tests if n in expected]
                if reported:
                    self.saw(reported, reported[-1])

        watcher = threading.Thread(target=poll, name="grading-progress", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
