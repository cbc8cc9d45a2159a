"""A notebook turned into what the package pipeline grades: one module holding the answer cells
(behind the source notebook's given cells), and one written answer per manually graded cell.

Cells are matched to the source notebook by grade_id. Given cells always come from the source (a
student's edit to a locked cell changes nothing); answer and written cells from the submission.
A cell that does not compile is left out with a note naming it, so the other cells still earn
their points (nbgrader, too, grades cell by cell)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.notebooks.cells import ANSWER, GIVEN, QUESTION, TEXT_STUB, WRITTEN, Cell

MARKER = re.compile(r"^(?P<indent>[ \t]*)#+[ \t]*(?P<which>BEGIN|END) SOLUTION\b.*$", re.MULTILINE)
MAGIC = re.compile(r"^([ \t]*)([%!].*)$", re.MULTILINE)  # IPython magics and shell lines: not Python


@dataclass(frozen=True)
class WrittenQuestion:
    """A manually graded cell of the source notebook, as the spec's [[written]] entry."""

    id: str
    points: float
    question: str


@dataclass
class Extracted:
    module: str  # the package's __init__.py
    answers: dict[str, str] = field(default_factory=dict)  # written id -> the answer's text
    notes: list[str] = field(default_factory=list)


def course_markers(code: str) -> str:
    """nbgrader's `### BEGIN SOLUTION` written as the course's `# BEGIN SOLUTION`, so the reference
    module stubs like any reference package."""
    return MARKER.sub(lambda m: f"{m['indent']}# {m['which']} SOLUTION", code)


def _without_markers(text: str) -> str:
    return MARKER.sub("", text).strip()


def _cell_code(cell: Cell, notes: list[str]) -> str:
    """The cell as module code: magics commented out; a cell that does not compile left out."""
    code = MAGIC.sub(lambda m: f"{m[1]}# (not Python, left out) {m[2]}", cell.source)
    try:
        compile(code, f"<cell {cell.grade_id}>", "exec", dont_inherit=True)  # parsed only, never run here
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:  # the parser's limits, too
        where = f" line {e.lineno}" if getattr(e, "lineno", None) else ""
        notes.append(f"cell {cell.grade_id!r} does not compile ({type(e).__name__} at{where or ' an unknown line'}: "
                     f"{getattr(e, 'msg', e)}): its functions were not graded; fix the cell and run it")
        return f"# cell {cell.grade_id!r} does not compile: left out\n"
    return code


def _by_id(cells: list[Cell], notes: list[str]) -> dict[str, Cell]:
    found: dict[str, Cell] = {}
    for cell in cells:
        if cell.grade_id in found:
            if cell.source != found[cell.grade_id].source:
                notes.append(f"cell {cell.grade_id!r} appears more than once (a copied cell keeps its id): "
                             "the first was graded")
            continue
        found[cell.grade_id] = cell
    return found


def written_questions(source: list[Cell]) -> list[WrittenQuestion]:
    """The manually graded cells of the source, each asked by the question cell just above it."""
    out, asked = [], ""
    for cell in source:
        if cell.role == QUESTION:
            asked = " ".join(line.strip() for line in cell.source.splitlines()
                             if line.strip() and not line.lstrip().startswith("#"))
        elif cell.role == WRITTEN:
            out.append(WrittenQuestion(cell.grade_id, cell.points, asked or f"the notebook's cell {cell.grade_id}"))
    return out


def extract(source: list[Cell], submitted: list[Cell] | None) -> Extracted:
    """The package module and written answers of `submitted` (None: the source's own, the reference)."""
    result = Extracted(module="")
    mine = _by_id(submitted, result.notes) if submitted is not None else {c.grade_id: c for c in source}
    parts = ['"""The answer cells of a notebook, in notebook order (generated at grading time)."""\n']
    for cell in source:
        if cell.role == GIVEN:
            parts.append(cell.source)
        elif cell.role == ANSWER:
            theirs = mine.get(cell.grade_id)
            if theirs is None:
                result.notes.append(f"answer cell {cell.grade_id!r} is missing from the notebook: its functions "
                                    "were not graded (start again from the released notebook's cell)")
                continue
            code = course_markers(theirs.source) if submitted is None else theirs.source
            parts.append(_cell_code(Cell(theirs.grade_id, ANSWER, code), result.notes))
        elif cell.role == WRITTEN and (theirs := mine.get(cell.grade_id)) is not None:
            result.answers[cell.grade_id] = _without_markers(theirs.source.replace(TEXT_STUB, ""))
    result.module = "\n\n\n".join(p.strip("\n") for p in parts) + "\n"
    return result
