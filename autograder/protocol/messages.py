"""Message kinds, statuses and option names: the vocabulary both sides of the sandbox share."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """The one status vocabulary of a graded test, from the judge's record to the report."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_GRADED = "not_graded"
    HELD = "held"  # passed on evidence the submission could write: points wait for an instructor's review


class HeldForReview(AssertionError):
    """Raised in the judge when a test's verdict would rest on the worker's word alone (a timing past
    what the card can do, a ledger that cannot be trusted): the test is recorded HELD with this
    reason, its points in no automatic total until an instructor reviews it."""


class AnswerProblem(AssertionError):
    """What is wrong with the student's own answer file (missing, a link, bad TOML, not a number, not
    answered yet). Raised in the judge with a message made only of the judge's words and that file,
    never a value from the worker: a hidden test shows it too (see judge/feedback.py). Test authors
    import it from autograder.testing."""


class RecordKind(str, Enum):
    """Kinds of the signed JSON lines the judge writes for the trusted side."""

    TEST = "test"
    PROGRESS = "progress"
    COLLECT_ERROR = "collect_error"
    SESSION_END = "session_end"


class Op(str, Enum):
    """Requests on the judge -> worker socket (the worker answers each with REPLY or RAISED, and may
    first ask CALLBACK questions the judge answers the same way). Each request's fields are typed in
    autograder/protocol/requests.py, which both ends parse them with."""

    HELLO = "hello"             # -> worker pid and generation
    BEGIN_TEST = "begin"        # nodeid, forbidden names, accounting rules, required kernels, seed
    END_TEST = "end"            # -> the test's ledger
    GETATTR = "getattr"         # target, name
    SETATTR = "setattr"         # target, name, value
    DELATTR = "delattr"         # target, name
    CALL = "call"               # target, args, kwargs
    CALL_METHOD = "callmethod"  # target, name, args, kwargs (one round trip for obj.method(...))
    SPECIAL = "special"         # target, dunder name, args: len, getitem, iter, bool, repr, ...
    SHIPPED = "shipped"         # module file, module name, qualname, args, kwargs: test-side code
    MEASURE = "measure"         # target, phase ("warmup" | "calibrate" | "timed" | "outputs" | "replayed" | "audit"), options
    REPLY = "reply"
    RAISED = "raised"
    CALLBACK = "callback"       # worker -> judge: call a judge function handed to the worker


# Requests that may run the submission's code: the worker's ledger carries one marker for each one
# the judge sends while no other request is open (the judge counts them too).
CALL_REQUESTS = frozenset(op.value for op in (Op.GETATTR, Op.SETATTR, Op.DELATTR, Op.CALL, Op.CALL_METHOD,
                                              Op.SPECIAL, Op.SHIPPED))

# The judge's options: autograder/protocol/run.py (one run description and the key's fd).

# Environment of the worker process: set by the judge, read by the worker's runtime.
ENV_ROLE = "AUTOGRADER_ROLE"        # "worker" inside the worker process
ROLE_WORKER = "worker"
# ... and of the workers of a multi-rank test (one per rank; see autograder.worker.ranks)
ENV_RANK = "AUTOGRADER_RANK"
ENV_WORLD = "AUTOGRADER_WORLD_SIZE"
ENV_STORE = "AUTOGRADER_DIST_STORE"        # the file store of the rendezvous
ENV_PROGRESS = "AUTOGRADER_DIST_PROGRESS"  # this rank's progress file (where it waits)
ENV_DIST_BACKEND = "AUTOGRADER_DIST_BACKEND"
ENV_DIST_TIMEOUT = "AUTOGRADER_DIST_TIMEOUT_S"
