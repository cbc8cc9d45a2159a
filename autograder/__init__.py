"""The course autograder: stage -> sandbox -> collect -> score -> report.

The public entry points are keyword-only functions in `autograder.grade`, `autograder.stubs` and
`autograder.invariants`; `python -m autograder` is a thin CLI over them.
"""

__version__ = "0.1.0"
