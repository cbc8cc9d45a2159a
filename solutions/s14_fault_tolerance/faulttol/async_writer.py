"""Asynchronous checkpointing: training goes on while the checkpoint is written.

`start` takes the snapshot (the state is serialised into memory at once: the copy a GPU job makes to
pinned host memory) and returns; the training loop then calls `advance` once per step, and each call
writes at most `chunk_bytes` more of the pending data into the temporary folder. When everything is
written and fsync'ed, that call seals the checkpoint (manifest, rename: files.seal). A crash before
the seal leaves only the temporary folder, which no loader accepts; the previous checkpoint stays the
latest valid one. (A thread would write in the background; the steps here interleave the writes
with the training deterministically, so the tests can stop the writer at any point.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .files import encode, seal, sha256, step_dir, temp_dir


@dataclass
class _Pending:
    """A checkpoint being written: per file its bytes, and how many are already on disk."""

    step: int
    data: dict[str, bytes]
    written: dict[str, int] = field(default_factory=dict)


class AsyncCheckpointer:
    """One checkpoint in flight at a time, under `root`."""

    def __init__(self, root: str | os.PathLike, chunk_bytes: int = 1 << 16) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"AsyncCheckpointer: chunk_bytes must be >= 1, got {chunk_bytes}")
        self.root, self.chunk_bytes = Path(root), chunk_bytes
        self._pending: _Pending | None = None
        self.committed: list[Path] = []  # every folder this writer sealed, oldest first

    @property
    def busy(self) -> bool:
        """True while a checkpoint is started and not yet sealed."""
        return self._pending is not None

    def start(self, step: int, files: dict[str, dict]) -> None:
        """Snapshot `files` (name -> state dict, e.g. {"rank0.pt": state}) for the checkpoint of
        `step` and return: the caller may change every tensor in it right away. Nothing of it is on
        disk yet. ValueError while another checkpoint is in flight or `step` is already committed."""
        if self.busy:
            raise ValueError(f"AsyncCheckpointer.start: step {self._pending.step} is still being written")
        if step_dir(self.root, step).exists():
            raise ValueError(f"AsyncCheckpointer.start: step {step} is already committed in {self.root}")
        # BEGIN SOLUTION
        tmp = temp_dir(self.root, step)
        tmp.mkdir(parents=True, exist_ok=True)
        for old in tmp.iterdir():  # a crashed earlier attempt at the same step
            old.unlink()
        self._pending = _Pending(step, {name: encode(state) for name, state in files.items()})
        # END SOLUTION

    def advance(self) -> Path | None:
        """Write up to chunk_bytes more of the checkpoint in flight (appending to its files in the
        temporary folder, file by file in the order `start` got them); when the last byte is
        written, fsync every file and seal. Returns the sealed folder on the call that sealed it,
        else None (also when nothing is in flight)."""
        if self._pending is None:
            return None
        # BEGIN SOLUTION
        pending, budget = self._pending, self.chunk_bytes
        tmp = temp_dir(self.root, pending.step)
        for name, data in pending.data.items():
            done = pending.written.get(name, 0)
            if done == len(data) and name in pending.written or budget == 0:
                continue
            piece = data[done:done + budget]
            with open(tmp / name, "ab") as f:
                f.write(piece)
            pending.written[name] = done + len(piece)
            budget -= len(piece)
        if any(pending.written.get(n, -1) != len(d) for n, d in pending.data.items()):
            return None
        for name in pending.data:
            with open(tmp / name, "rb+") as f:
                os.fsync(f.fileno())
        digests = {n: {"bytes": len(d), "sha256": sha256(d)} for n, d in pending.data.items()}
        final = seal(self.root, pending.step, digests)
        self._pending = None
        self.committed.append(final)
        return final
        # END SOLUTION

    def finish(self) -> Path | None:
        """Write the checkpoint in flight to the end (advance until sealed); its folder, or None."""
        while self.busy:
            if (final := self.advance()) is not None:
                return final
        return None
