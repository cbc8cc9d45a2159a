"""Each test's time limit counted in its own time (judge/own_time.py), through pytest-timeout's hook.

pytest-timeout still reads the limit (the run's --timeout, a test's `timeout` mark) and cancels the
timer; this plugin only sets it. The alarm is armed for the time left; when it rings before the test
has used its limit of own time (its processes waited for a CPU), it is armed again for what is left.
The failure names both clocks, so a timeout on a loaded host reads as what it was.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from autograder.judge.own_time import Deadline, clock

MIN_REARM_S = 0.05


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's own thread timer (it ends the process: no clock can help there)
    deadline = Deadline(float(settings.timeout), clock())

    def ring(signum: int, frame: Any) -> None:
        left = deadline.left()
        if left > MIN_REARM_S:
            signal.setitimer(signal.ITIMER_REAL, left)
            return
        own, wall = deadline.used()
        __tracebackhide__ = True
        pytest.fail(f"Timeout: the test used its limit of {deadline.limit_s:g} s ({own:.1f} s of its own time, "
                    f"{wall:.1f} s on the wall clock: the difference is time it waited for a CPU on a busy host)",
                    pytrace=False)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's cancel hook calls it
    signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, deadline.limit_s)
    return True
