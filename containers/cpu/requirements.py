"""Print the pinned requirements of a CPU grading image: the course's runtime dependencies (the
`dependencies` of pyproject.toml, no extras) and everything they need, at the versions installed in
the running environment (the course's .venv), one `name==version` per line.

    .venv/bin/python containers/cpu/requirements.py pyproject.toml > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement


def closure(roots: list[str]) -> dict[str, str]:
    """{distribution name: installed version} of `roots` and their dependencies (markers evaluated
    for this interpreter, extras requested by a parent followed)."""
    env = default_environment()
    found: dict[str, str] = {}
    todo = [(Requirement(r), frozenset()) for r in roots]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        req, extras = todo.pop()
        key = (_canonical(req.name), frozenset(req.extras) | extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            sys.exit(f"error: {req.name} is required but not installed here; run `make setup` first")
        found[_canonical(req.name)] = dist.version
        for text in dist.requires or []:
            child = Requirement(text)
            wanted = set(req.extras) or {""}
            if child.marker and not any(child.marker.evaluate(env | {"extra": e}) for e in wanted):
                continue
            todo.append((child, frozenset()))
    return found


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(pyproject: str) -> None:
    with open(pyproject, "rb") as f:
        roots = tomllib.load(f)["project"]["dependencies"]
    for name, version in sorted(closure(roots).items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
