"""Solution markers: `# BEGIN SOLUTION` ... `# END SOLUTION` regions become one `raise` line.

The replacement keeps the BEGIN marker's indentation and names a greppable task id, e.g.
`raise NotImplementedError("s01.3: rms_norm")`. Signatures, type hints and docstrings live outside
the regions and survive untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.errors import GraderError

BEGIN = re.compile(r"^(?P<indent>\s*)#\s*BEGIN SOLUTION\b")
END = re.compile(r"^\s*#\s*END SOLUTION\b")
DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>\w+)")
CLASS = re.compile(r"^(?P<indent>\s*)class\s+(?P<name>\w+)")


@dataclass(frozen=True)
class Region:
    """One solution region: 0-based line numbers of its markers and the function it sits in."""

    begin: int
    end: int
    indent: str
    function: str


def _enclosing_function(lines: list[str], index: int, indent: str) -> str | None:
    """Name of the nearest `def` above `index` indented less than the marker ("Class.method")."""
    name, depth = None, len(indent)
    for line in reversed(lines[:index]):
        for pattern in (DEF, CLASS):
            m = pattern.match(line)
            if m and len(m["indent"]) < depth:
                if pattern is DEF and name is None:
                    name, depth = m["name"], len(m["indent"])
                elif pattern is CLASS and name is not None:
                    return f"{m['name']}.{name}"
                break
    return name


def find_regions(text: str, filename: str) -> list[Region]:
    """All regions of a source file; GraderError with file:line on unterminated/nested/stray markers."""
    lines = text.splitlines()
    regions: list[Region] = []
    open_at: int | None = None
    for i, line in enumerate(lines):
        if BEGIN.match(line):
            if open_at is not None:
                raise GraderError(f"{filename}:{i + 1}: BEGIN SOLUTION nested inside the region opened at line {open_at + 1}")
            open_at = i
        elif END.match(line):
            if open_at is None:
                raise GraderError(f"{filename}:{i + 1}: END SOLUTION without a matching BEGIN SOLUTION")
            indent = BEGIN.match(lines[open_at])["indent"]
            function = _enclosing_function(lines, open_at, indent)
            if function is None:
                raise GraderError(f"{filename}:{open_at + 1}: a solution region must sit inside a function body")
            regions.append(Region(open_at, i, indent, function))
            open_at = None
    if open_at is not None:
        raise GraderError(f"{filename}:{open_at + 1}: BEGIN SOLUTION is never closed by END SOLUTION")
    return regions


def strip_solutions(text: str, filename: str, prefix: str, counter: int) -> tuple[str, int]:
    """Replace every region of `text`; task ids count on from `counter`. Returns (stub, counter)."""
    regions = find_regions(text, filename)
    if not regions:
        return text, counter
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for region in regions:
        counter += 1
        out.extend(lines[cursor : region.begin])
        task = f"{prefix}.{counter}: {region.function}"
        out.append(f'{region.indent}raise NotImplementedError("{task}")\n')
        cursor = region.end + 1
    out.extend(lines[cursor:])
    return "".join(out), counter


def keep_solutions(text: str, filename: str) -> str:
    """The reference with its marker lines dropped and every body kept: how a given package from an
    earlier assignment ships (its exercise is due, so its answer is no longer a secret)."""
    drop = {i for region in find_regions(text, filename) for i in (region.begin, region.end)}
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True)) if i not in drop)


def has_markers(text: str) -> bool:
    return any(BEGIN.match(line) or END.match(line) for line in text.splitlines())


# Written answers (answers/<id>.md): the reference answer sits between these HTML comments and
# becomes the placeholder in the student copy.
MD_REGION = re.compile(r"<!--\s*BEGIN SOLUTION\s*-->.*?<!--\s*END SOLUTION\s*-->", re.DOTALL)
MD_MARKER = re.compile(r"<!--\s*(BEGIN|END) SOLUTION\s*-->")


def strip_answer(text: str, filename: str, placeholder: str) -> str:
    """A written answer's student copy: each marked region replaced by `placeholder`."""
    stripped = MD_REGION.sub(placeholder, text)
    if MD_MARKER.search(stripped):
        raise GraderError(f"{filename}: an unmatched BEGIN/END SOLUTION comment")
    return stripped


# Numeric answers (answers/<id>.toml): the reference values sit between `# BEGIN SOLUTION` and
# `# END SOLUTION` lines; the student copy keeps every key with the value nan (not answered yet).
TOML_VALUE = re.compile(r"^(?P<key>\s*[A-Za-z0-9_-]+\s*=\s*)(?P<value>[^#]*?)(?P<comment>\s*#.*)?$")


def strip_numeric(text: str, filename: str) -> str:
    """A numeric answer file's student copy: inside each marked region, `key = value` becomes
    `key = nan` (comments kept); the marker lines go."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if BEGIN.match(line) or END.match(line):
            if bool(BEGIN.match(line)) == inside:
                raise GraderError(f"{filename}: an unmatched BEGIN/END SOLUTION line")
            inside = not inside
            continue
        match = TOML_VALUE.match(line.rstrip("\n")) if inside else None
        out.append(f"{match['key']}nan{match['comment'] or ''}\n" if match else line)
    if inside:
        raise GraderError(f"{filename}: a BEGIN SOLUTION line without its END")
    return "".join(out)
