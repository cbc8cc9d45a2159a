"""The judge's pytest command line: the interpreter, the grader's plugin, and only the plugins a
graded run uses.

pytest's plugin autoload walks the entry points of every installed distribution, about 0.9 s of
each judge's start on the course's environment (0.2 s without), and a grading starts two or more
judges. So the judge starts with autoload off and names its plugins: the timeout (every test's
limit), hypothesis (model-based hidden tests) and anyio (async tests), each only where it is
installed (a bare GPU image may lack one; no test there can then need it).
"""

from __future__ import annotations

import importlib.util
import sys

JUDGE_PLUGIN = "autograder.judge.plugin"
# (module pytest loads, the distribution's module that must be importable for it)
OPTIONAL_PLUGINS = (("pytest_timeout", "pytest_timeout"), ("_hypothesis_pytestplugin", "hypothesis"),
                    ("anyio.pytest_plugin", "anyio"))
AUTOLOAD_OFF = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def installed_plugins() -> list[str]:
    """The optional plugins importable by this interpreter: the one the bwrap and plain sandboxes
    run; the container images install all three (containers/cpu from pyproject.toml,
    gpu_runners/Dockerfile by name), as a plugin named here but missing there stops every run."""
    return [plugin for plugin, module in OPTIONAL_PLUGINS if importlib.util.find_spec(module) is not None]


def judge_argv(*args: str) -> list[str]:
    """`python -m pytest` with the grader's plugin and the installed optional ones, then `args`.
    Run it with AUTOLOAD_OFF in its environment."""
    plugins = [flag for plugin in [JUDGE_PLUGIN, *installed_plugins()] for flag in ("-p", plugin)]
    return [sys.executable, "-m", "pytest", *plugins, *args]
