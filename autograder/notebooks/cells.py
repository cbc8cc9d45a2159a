"""A notebook's cells as nbgrader sees them, read as plain JSON (nbformat 4): grading a notebook
needs no Jupyter package, and a student's file is data here, never run on the trusted side."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.errors import GraderError

MAX_BYTES = 16 * 2**20  # a notebook larger than this (outputs, images) is not read
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader's cleared text answer (solutions/notebooks/nbgrader_config.py)
GIVEN = "given"    # locked code cell: context the answers need (constants, imports), read from the source
ANSWER = "answer"  # autograded answer: code cell whose functions the tests call
WRITTEN = "written"  # manually graded answer: free text, points pending until an instructor grades it
QUESTION = "question"  # locked markdown cell: the text above an answer
ROLES = (GIVEN, ANSWER, WRITTEN, QUESTION)
GRADE_ID = re.compile(r"[a-z][a-z0-9_]*")  # a written answer's id is its grade_id (answers/<id>.md)


@dataclass(frozen=True)
class Cell:
    """One cell with nbgrader metadata."""

    grade_id: str
    role: str
    source: str
    points: float = 0.0

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"cell {self.grade_id!r}: role {self.role!r} is not one of {ROLES}")
        if self.role == WRITTEN and not GRADE_ID.fullmatch(self.grade_id):
            raise ValueError(f"written cell {self.grade_id!r}: a grade_id of lowercase letters, digits and _")
        if self.role == WRITTEN and not self.points > 0:
            raise ValueError(f"written cell {self.grade_id!r}: points must be > 0, got {self.points}")


def _role(cell: dict) -> str | None:
    """The cell's role from its nbgrader flags; None for a cell grading ignores (nbgrader's own
    test cells: the course's master tests replace them)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    code = cell.get("cell_type") == "code"
    solution, grade, locked = (bool(meta.get(k)) for k in ("solution", "grade", "locked"))
    if solution and not grade and code:
        return ANSWER
    if solution and grade and not code:
        return WRITTEN
    if locked and not solution and not grade:
        return GIVEN if code else QUESTION
    return None


def parse_cells(text: str, name: str) -> list[Cell]:
    """The nbgrader cells of notebook JSON `text`, in order; GraderError naming `name` when it is not
    a notebook."""
    try:
        notebook = json.loads(text)
        raw = notebook["cells"]
        if not isinstance(raw, list):
            raise TypeError("cells is not a list")
        cells = []
        for cell in raw:
            role = _role(cell)
            if role is None:
                continue
            meta = cell["metadata"]["nbgrader"]
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            cells.append(Cell(str(meta.get("grade_id", "")), role, source, float(meta.get("points", 0) or 0)))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GraderError(f"{name} is not a readable notebook: {type(e).__name__}: {e}") from None
    return cells


def read_cells(path: Path) -> list[Cell]:
    """The nbgrader cells of the notebook at `path` (GraderError when missing, too big or not JSON)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise GraderError(f"{path.name} is over {MAX_BYTES // 2**20} MiB: clear its outputs and submit it again")
        text = path.read_bytes().decode(errors="replace")
    except OSError as e:
        raise GraderError(f"{path}: cannot read the notebook ({e.strerror})") from None
    return parse_cells(text, path.name)
