"""The course's environments and their software versions (`course/versions.toml`).

One table names the versions of the student CPU setup and of the GPU image; perf bars name the
environment they were measured in, and calibration finds which environment it runs in from the
installed packages.
"""

from __future__ import annotations

import importlib.metadata
import platform
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autograder.errors import GraderError

TABLE = Path("course") / "versions.toml"
PACKAGES = ("torch", "triton", "transformers")


@dataclass(frozen=True)
class Environment:
    """One environment: Python's major.minor and the exact versions of the packages that matter."""

    name: str
    description: str
    python: str
    torch: str
    triton: str
    transformers: str
    image: str | None = None

    def versions(self) -> dict[str, str]:
        return {"python": self.python, **{p: getattr(self, p) for p in PACKAGES}}

    def summary(self) -> str:
        """'Python 3.12, torch 2.11.0+cu130, triton 3.6.0, transformers 5.17.0'."""
        return ", ".join(f"{'Python' if k == 'python' else k} {v}" for k, v in self.versions().items())


def load_environments(root: Path) -> dict[str, Environment]:
    """Every environment of the table under the course root; GraderError naming what is wrong."""
    path = root / TABLE
    try:
        entries = tomllib.loads(path.read_text())["env"]
        return {name: Environment(name=name, **fields) for name, fields in entries.items()}
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise GraderError(f"{path}: not a readable table of environments ({e})") from None


def installed() -> dict[str, str]:
    """The versions here, keyed like Environment.versions() ('' for a package that is not installed)."""
    out = {"python": ".".join(platform.python_version_tuple()[:2])}
    for package in PACKAGES:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = ""
    out["torch"] = _torch_build(out["torch"])
    return out


def _torch_build(metadata_version: str) -> str:
    """torch's version as the running build reports it ('2.11.0+cu130').

    Some images install torch with metadata that drops the local build tag ('2.11.0') although the
    build is the CUDA 13.0 one; the running module's `torch.__version__` always carries it.
    """
    if not metadata_version or "+" in metadata_version:
        return metadata_version
    try:
        import torch
    except ImportError:
        return metadata_version
    return str(torch.__version__)


def environment_here(root: Path) -> Environment:
    """The environment whose versions are exactly the installed ones; GraderError when none is."""
    here = installed()
    for env in load_environments(root).values():
        if env.versions() == here:
            return env
    found = ", ".join(f"{k} {v or 'missing'}" for k, v in here.items())
    raise GraderError(f"this machine ({found}) matches no environment of {root / TABLE}: add an entry "
                      "for it there (bars measured here must name the software they were measured with)")
