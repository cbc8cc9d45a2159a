"""The course autograder. The folders are its trust boundaries:

- `host/` and `sandbox/`: outside the sandbox (trusted): spec, stage, the sandbox backends,
  collect, score, report; `authoring/`: course tooling (stubs, releases, calibration, mutants).
- `judge/`: inside the sandbox, trusted: the pytest plugin, the proxies of student objects, the
  timing bracket, the verdict and the signed records. It never imports student code.
- `worker/`: inside the sandbox, untrusted: runs the student's package with the student-side
  runtime (op accounting, forbidden-API patches, the course timer).
- `protocol/`: what the judge and the worker share: message kinds, statuses, the wire, the
  shared-memory arenas, plain data, the accounting rules.
- `classroom/`: outside any one grading: a whole class graded into a gradebook (late policy,
  exports), the Gradescope package, and merging a CPU and a GPU grading of one submission.
- `testing.py`, `timing.py`, `hardware.py`: the API test files use (oracle, in_worker, measure).

The entry points are keyword-only functions in `autograder.host.grade`, `autograder.authoring.stubs`
and `autograder.authoring.invariants`; `python -m autograder` is a thin CLI over them.
"""

__version__ = "0.1.0"
