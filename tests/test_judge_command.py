"""The judge's pytest starts without plugin autoload and names the plugins a graded run uses."""

from __future__ import annotations

import subprocess
import sys

from autograder.host import judge_command
from autograder.host.judge_command import AUTOLOAD_OFF, JUDGE_PLUGIN, judge_argv


def test_the_judge_names_its_plugins_and_skips_those_not_installed(monkeypatch):
    argv = judge_argv("tests/test_x.py")
    assert argv[1:3] == ["-m", "pytest"] and argv[-1] == "tests/test_x.py"
    named = [argv[i + 1] for i, a in enumerate(argv) if a == "-p"]
    assert named == [JUDGE_PLUGIN, "pytest_timeout", "_hypothesis_pytestplugin", "anyio.pytest_plugin"]
    monkeypatch.setattr(judge_command, "OPTIONAL_PLUGINS", (("pytest_timeout", "pytest_timeout"),
                                                            ("absent_plugin", "no_such_module_here")))
    named = [a for a in judge_argv() if a not in ("-p",)][3:]
    assert named == [JUDGE_PLUGIN, "pytest_timeout"], named


def test_with_autoload_off_the_named_plugins_still_give_the_timeout_option(tmp_path):
    """--timeout (every graded test's limit) must still parse: pytest_timeout is loaded by name."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    plugins = [flag for plugin in judge_command.installed_plugins() for flag in ("-p", plugin)]
    argv = [sys.executable, "-m", "pytest", *plugins, "-q", "--timeout=5", "-p", "no:cacheprovider", "test_one.py"]
    run = subprocess.run(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **AUTOLOAD_OFF}, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
