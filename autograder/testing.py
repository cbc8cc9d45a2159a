"""Helpers for test authors, used on both sides of the judge/worker split.

- `oracle()`: the test's own reference code. In the judge (where test bodies run) nothing of the
  submission's runs, so it marks intent only; in the worker (inside an `in_worker` function) it
  lifts the forbidden-API patches and the op and kernel accounting records nothing inside it.
- `in_worker`: a module-level test function that must run beside the student's code (a backward
  through the student's autograd Function, a monkeypatch the package must see, a guard such as a
  TorchFunctionMode). In the judge, calling it runs it in the worker with the arguments copied
  there, and returns its result as judge values; in the worker it is the plain function. What it
  returns is as untrusted as anything else from the worker: check it in the judge.
- `tolerances(folder)`: the numerical contract of an assignment (`[tolerances]` of the
  assignment.toml in `folder`): what is compared -> the rtol/atol of `torch.testing.assert_close`.
  The handout prints the same table, so a tolerance a test uses is one the student was told.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from autograder.protocol.messages import ENV_ROLE, ROLE_WORKER, AnswerProblem, Op
from autograder.worker import accounting, forbid, trust

F = TypeVar("F", bound=Callable[..., Any])


def in_the_worker() -> bool:
    return os.environ.get(ENV_ROLE) == ROLE_WORKER


@contextmanager
def oracle() -> Iterator[None]:
    """Within this block the forbidden APIs work again and nothing is accounted to the submission.

    Backward passes through an oracle's graph must run inside the block too. Called with the
    submission's code on the stack (directly or through a test helper), it lifts nothing and fails
    the test. Who is the submission is decided by identity (autograder/worker/trust.py: code the
    worker compiled from the master tests, or a module loaded before the package), never by a
    frame's `__name__`, which code compiled by the submission can claim.
    """
    acct = accounting.current()
    checked = acct is not None or trust.pinned()  # in the worker, or an in-process test of the accounting
    if checked and (where := accounting.called_from_package(acct.package if acct is not None else "")):
        if acct is not None:
            acct.ledger.problems.append(f"{where} called autograder.testing.oracle(): the accounting "
                                        "cannot be lifted from inside the submission")
        yield
        return
    with ExitStack() as stack:
        stack.enter_context(forbid.lifted())
        if acct is not None:
            stack.enter_context(acct.paused())
        yield


def tolerances(folder: str | os.PathLike[str]) -> Callable[[str], dict[str, float]]:
    """tol(name) -> {"rtol": r, "atol": a} from the [tolerances] table of `folder`/assignment.toml;
    a name that is not in the table raises KeyError naming the known ones."""
    import tomllib
    from pathlib import Path

    from autograder.host.spec import parse_tolerances

    table = parse_tolerances(tomllib.loads((Path(folder) / "assignment.toml").read_text()).get("tolerances", {}))

    def tol(name: str) -> dict[str, float]:
        if name not in table:
            raise KeyError(f"no tolerance {name!r} in assignment.toml [tolerances]; known: {sorted(table)}")
        return table[name].kwargs()

    return tol


def in_worker(fn: F) -> F:
    """Run `fn` (a module-level function of a test module or conftest) in the worker process."""
    if in_the_worker():
        return fn
    if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
        raise TypeError(f"in_worker: {fn.__qualname__} must be defined at module level of a test file")
    code = fn.__code__

    @functools.wraps(fn)
    def shipped(*args: Any, **kwargs: Any) -> Any:
        from autograder.judge import audit, this_run

        if this_run.client_if_started() is None:  # plain pytest, the student's quick loop: one process, no grade
            return fn(*args, **kwargs)
        value = this_run.client().request(Op.SHIPPED, code.co_filename, fn.__module__, fn.__qualname__, args, kwargs)
        if this_run.has_guarded_audit():  # a kernel exercise times what it returns again in its audit worker
            audit.note_recipe(value, audit.Recipe(code.co_filename, fn.__module__, fn.__qualname__, args, kwargs))
        return value

    return shipped  # type: ignore[return-value]


def read_answer(root: str | os.PathLike[str], rel: str, max_bytes: int = 1 << 20) -> str:
    """The text of the student's file `rel` (e.g. "answers/run.json") under `root` (the run's folder:
    pytest's rootdir), read without following links and capped at `max_bytes`; a missing file or a
    link fails the test with what to do."""
    from pathlib import Path

    from autograder.host.stage import read_no_follow

    try:
        return read_no_follow(Path(root) / rel)[:max_bytes].decode(errors="replace")
    except FileNotFoundError:
        raise AnswerProblem(f"{rel} is missing: make it from your own run (see the README)") from None
    except OSError as e:
        raise AnswerProblem(f"{rel} could not be read ({e.strerror}; a link is refused): write the file itself") from None


def numeric_answer(root: str | os.PathLike[str], answer_id: str, key: str) -> float:
    """The number the student wrote for `key` in answers/<answer_id>.toml under `root`. A missing
    file or key, a link, bad TOML, a value that is not a number, or nan (the stub's "not answered
    yet") fails the test with what to fix. The test then compares it with the value it recomputes
    from the student's own code or data."""
    import math
    import tomllib

    rel = f"answers/{answer_id}.toml"
    try:
        table = tomllib.loads(read_answer(root, rel, 64 * 1024))
    except tomllib.TOMLDecodeError as e:
        raise AnswerProblem(f"{rel} is not valid TOML: {e}") from None
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnswerProblem(f"{rel}: {key} must be a number, got {value!r}")
    if math.isnan(value):
        raise AnswerProblem(f"{rel}: {key} is not answered yet (nan): replace it with your value")
    return float(value)


def course_model_dir(name: str = "course-llama") -> Path | None:
    """datasets/models/<name> of the course tree (its config.json and model.safetensors), or None
    where it is not built. Searched from $COURSE_ROOT, the working directory and its parents (a
    grading runs in a staged copy), and the checkout the grader itself runs from."""
    roots = [Path(os.environ["COURSE_ROOT"])] if os.environ.get("COURSE_ROOT") else []
    roots += [Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parents[1]]
    folders = (root / "datasets" / "models" / name for root in roots)
    return next((f for f in folders if (f / "config.json").is_file() and (f / "model.safetensors").is_file()), None)
